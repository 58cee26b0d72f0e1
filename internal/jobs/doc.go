// Package jobs is jetagent's job pipeline on NATS JetStream: the wire
// types, the JetStream topology, the Worker that consumes and runs jobs,
// and the Client that submits and follows them.
//
// # Wire contract (prefix "agent", configurable through Names)
//
//   - jobs: stream AGENT_JOBS (WorkQueue, file storage), subjects
//     agent.jobs.<queue>, duplicate window on Nats-Msg-Id = job id.
//   - events: stream AGENT_EVENTS (Limits, MaxAge), subjects
//     agent.events.<job_id>.<type>, Nats-Msg-Id <job_id>.<attempt>.<seq>.
//   - state: KV bucket AGENT_STATE, key <job_id>, compare-and-swap updates.
//   - transcripts: object store AGENT_TRANSCRIPTS, <job_id> (reflected)
//     and <job_id>.raw (raw); also the journal's values too large for a
//     message (<job_id>.journal.<entry>, <job_id>.checkpoint) and the data
//     of events too large for one (<job_id>.event.<attempt>.<seq>).
//   - journal: KV bucket AGENT_JOURNAL, keys <job_id>.j.<entry> (a
//     running job's calls) and <job_id>.cp (its checkpoint), from which
//     another attempt resumes; purged when the job ends.
//   - dead letters: stream AGENT_DLQ, subjects agent.dlq.<queue>: the
//     original payload with a Jetagent-Reason header.
//   - cancel: core NATS request on agent.cancel.<job_id>.
//   - AGENT_ADVISORIES keeps the server's max-deliveries advisories for
//     AGENT_JOBS until a worker has dead-lettered the job they name.
//
// The payloads are described by the JSON Schemas of package schemas.
//
// # Worker
//
// Each queue has one durable pull consumer shared by every worker. A worker
// fetches one message per free slot of its concurrency limit, so no message
// sits in a local buffer while its AckWait runs, and marks running jobs in
// progress every Heartbeat. A job's life in the state bucket is
//
//	queued -> running -> succeeded | failed | cancelled | dead
//
// with running -> queued when a job is handed back (a Retryable runner
// error, or shutdown). Every transition is a compare-and-swap guarded by
// the attempt and worker id that claimed the job, so a job is never
// settled twice, and a redelivery of a job whose state is already final is
// acknowledged without running.
//
// A job is refused at the door — not JSON, failing job.schema.json, larger
// than MaxJobBytes, or naming an MCP server the operator did not configure —
// by TermWithReason, a copy to the dead-letter stream with the reason, and
// state dead with the reason. A job whose deliveries all end without an ack
// (crashing workers) is dead-lettered from the server's max-deliveries
// advisory; one whose last allowed attempt fails with a Retryable error is
// dead-lettered by its worker.
//
// On shutdown (Run's context ends) a worker stops fetching, lets running
// jobs finish for ShutdownGrace, then cancels the rest with ErrShutdown and
// hands them back with NakWithDelay; another worker takes them.
//
// A cancel request (Client.Cancel) sets cancel_requested in the state and
// asks on agent.cancel.<id>; the worker running the job cancels its
// context, the job ends cancelled and is acknowledged, so it is never
// delivered again.
//
// What a job does is a Runner's business (cmd/worker adapts the agent
// loop); the worker gives it a RunEnv for events and checkpoints.
package jobs
