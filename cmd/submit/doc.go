// Command submit sends tasks to jetagent workers and follows them: it
// validates a job against schemas/job.schema.json (refusing it with the
// words a worker would use), publishes it on agent.jobs.<queue> with its id
// as Nats-Msg-Id, prints the job's events live and its final answer, and
// exits 0 only when the job succeeded.
//
//	submit "task"                    submit and follow
//	echo "task" | submit             the task on stdin
//	submit --detach "task"           print the id and return
//	submit --file tasks.jsonl --out results.jsonl --parallel 8
//	submit status ID | watch ID | transcript ID [--raw] | cancel ID
//
// --json makes every output JSON lines. It reaches NATS through NATS_URL
// (default nats://127.0.0.1:4222, the worker's embedded server) and the
// other NATS_* variables; `submit --help` lists them.
package main
