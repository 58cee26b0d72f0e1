// Command bench measures jetagent on this machine in one run and prints a
// table (`make bench`; --json for the same numbers as JSON). Everything runs
// in this process except the MCP server:
//
//   - raw: the JetStream limit with the worker's own stream settings — a
//     stream and consumer made by jobs.EnsureTopology (prefix "rawbench") on
//     the same embedded server: synchronous publish (with a Nats-Msg-Id, as
//     jobs.Client.Submit sends), asynchronous publish, and pull-consume
//     (Fetch batches of 100) with an ack per message.
//   - e2e: the real worker pipeline — jobs.Worker + agentrun.Runner +
//     agentloop + a toolcache pool whose one server is the bundled
//     examples/mcpserver built as a binary and spoken to over stdio — against
//     the scripted model of internal/llm/llmtest. Each job takes two model
//     requests (a tool call of "add", then the answer) and one MCP
//     tools/call. "concurrency C" means C jobs kept in flight by C
//     closed-loop submitters (jobs.Client.Submit, then the job's terminal
//     state seen on one watch of the state bucket), with every worker's
//     Concurrency set to C. Latency is from Submit to that state. Each row
//     has its own embedded NATS (jobs.StartEmbedded in a temporary
//     directory, in-process connections) and its own worker processes'
//     pools, after a short warm-up.
//   - NATS operations per job: the embedded server's message counters
//     (server.Varz in_msgs and out_msgs, which count every message clients
//     of this process — workers and submitter — published to the server and
//     the server delivered to them, JetStream API requests and replies,
//     KV/object-store traffic, acks, heartbeats and pull requests included)
//     after the warm-up and after the last job, divided by the jobs.
//   - model latency: the same pipeline with a model that answers after a
//     timer (200 ms by default), against Little's law: C jobs in flight
//     and two model requests per job allow at most C / (2 × latency) jobs/s.
//   - memory: one worker with Concurrency --held (1,000) and as many jobs
//     held at their first model request at once; the growth of the live heap
//     (after a GC) and of goroutines, divided by the jobs. It is the whole
//     process (worker, embedded NATS, submitter, scripted model).
//   - CPU per job (zero-latency rows): getrusage(RUSAGE_SELF) user + system
//     plus utime + stime of the live child processes (/proc/<pid>/stat: the
//     MCP servers) over the timed jobs, divided by them. The submitter and
//     the scripted model run in this process too: an upper bound.
//   - large catalog: the same jobs (default tool_mode) with every capture
//     in --catalogs (../shared/catalogs/*.json) added to the pool as
//     in-process mcp-go servers (one per file, verbatim input schemas,
//     handlers answering "ok"; "add" stays on the example server): CPU per
//     job at --catalog-concurrency in flight and memory per job with
//     --catalog-held held, next to the same with the example server alone.
//   - search mode: jobs with tool_mode "search" whose model calls
//     search_tools, then call_tool of add (three model requests), one in
//     flight, on the example catalog and with --search-sizes catalog tools
//     (the captures, then copies with suffixed names): latency and CPU per
//     job. Both catalog parts are skipped, with a line saying so, when
//     --catalogs holds no *.json.
//   - round trips: one job in flight with the worker's connection over TCP,
//     direct and through a proxy that delays each direction by --net-delay;
//     the extra median cycle (one submission to the next) divided by the
//     extra round trip is the job's sequential NATS round trips.
//   - full queue: --full-queue jobs queued on a nats-server process (built
//     from the module's dependency), then one worker of
//     --full-queue-concurrency slots over TCP: slots holding a job (the
//     consumer's ack pending) and jobs in the runner, sampled while jobs
//     wait; CPU of this process and of nats-server per job.
//   - worker sent/got: the workers' own connections' messages (Connz).
//
// A CPU profile of the whole run is written with --cpuprofile.
//
// The pooled-vs-bare-vs-spawned MCP call and the tool-search scale are the
// toolcache benchmarks (internal/toolcache/bench_test.go); --toolcache runs
// them through `go test` and appends their output.
package main
