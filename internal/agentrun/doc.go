// Package agentrun runs a job with the agent loop: it is the jobs.Runner
// the worker binary plugs into jobs.Worker.
//
// For each attempt it turns the wire job (jobs.Job) into the loop's input
// (agentloop.Input): the job's view of the MCP pool (servers, allow and
// deny), its client tools answered by the submitter over NATS, an event
// sink and a checkpoint store backed by the worker (jobs.RunEnv), and the
// checkpoint of an earlier attempt to resume from. It reflects the loop's
// raw transcript (package reflect), keeping out of the reflected one what
// the job door would refuse in a continuation's history (wellFormed), and
// marks the errors another attempt may fix as jobs.Retryable.
//
// The rules about the job's content live in the loop (the system prompt,
// rounds, modes); the rules about delivery live in jobs. This package only
// connects them, so both sides can be tested apart and together.
package agentrun
