// Package journal records a job's effects so that a later attempt of the
// same job does not do them again.
//
// A tool call with side effects is journaled twice: an intent before it is
// sent (name, arguments and an idempotency key made of the job id and the
// call id, the same in every attempt) and a completion after it returns
// (its result). A later attempt that reaches the same call takes the
// result from the completion instead of running it. A call with an intent
// and no completion was in flight when the earlier attempt stopped: it is
// sent again only when the tool says it is safe to (MCP's readOnlyHint or
// idempotentHint, or an operator's override); otherwise the call is
// reported as interrupted, its effect unknown, and nothing runs.
//
// Besides calls the journal holds values: a round's model answer (so the
// calls of an interrupted round keep their ids and arguments), and, for
// code mode, each Date.now and Math.random a script saw, so a re-run script
// takes the same path. Keys are chosen by the caller and name the place of
// an entry in the job ("t3" for round 3's answer, "c3.0" for its first
// call, "c3.0.5" for the sixth call inside that call's script): an entry is
// matched by its place, and a call by its name and arguments too, so an
// attempt that goes another way is told (ErrDiverged) rather than given
// another call's result.
//
// The journal does not know where it is stored: a [Store] puts entries
// durably (the worker uses a NATS KV bucket, one key per entry, purged
// when the job has its final state) and [New] takes what an earlier
// attempt left. A Store whose Put fails makes the call fail with
// ErrUnavailable before anything is sent: a call whose intent is not
// stored could repeat unseen.
package journal
