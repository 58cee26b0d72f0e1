// Package schemas embeds jetagent's wire contract as JSON Schema 2020-12
// documents, so the worker, the submit CLI and the tests validate against
// the very files an outside client reads:
//
//   - job.schema.json: a job published on agent.jobs.<queue>
//   - event.schema.json: an event on agent.events.<job_id>.<type>
//   - result.schema.json: the outcome of a job (terminal events, submit --out)
//   - state.schema.json: a value in the AGENT_STATE key-value bucket
//   - transcript.schema.json: an object in the AGENT_TRANSCRIPTS object store
//   - client_request.schema.json, client_response.schema.json: a client tool
//     call on agent.client.<job_id> and its answer (package clienttools)
package schemas
