// Package clienttools carries client tools: tools a job declares
// (client_tools: name, description, input_schema) that live with the
// submitter, not the worker. The worker offers them to the model beside the
// server's tools; when the model calls one, the worker asks the submitter
// over core NATS and the answer becomes the tool result.
//
// # Merging
//
// Merge adds the declarations to the job's server tools. The server wins: a
// client tool can never shadow a server tool, and each clash is returned for
// the loop to report as an event. ValidateDecls bounds the declarations
// (count, bytes per tool and in all) and checks names and schemas.
//
// # Transport
//
// The worker's Caller publishes a Request on <prefix>.client.<job_id>
// (prefix "agent" by default) with its own inbox as reply subject and waits,
// up to the per-job timeout, for an Answer. The submitter's Serve subscribes
// to that subject and answers with a Handler; LocalMCPHandler answers by
// calling a local MCP pool (`submit --local-mcp CONFIG`) and LocalMCPDecls
// declares that pool's tools. The JSON messages are described in
// schemas/client_request.schema.json and schemas/client_response.schema.json,
// with test vectors, so a service in any language can answer.
//
// # Who may answer
//
// The submitter generates a per-job secret (NewSecret) and puts it in the
// job (client_secret). Both directions carry an HMAC-SHA256 under it; the
// secret itself never crosses the wire again. This was chosen over an inbox
// declared in the job, because an inbox only hides where to listen: anyone
// who can subscribe to it (or to the request subject) sees the reply subject
// and can answer first, and anyone who can publish to it could make the
// submitter run its local tools (a filesystem server, say). With MACs:
//
//   - the worker takes only an answer whose MAC verifies for its request id;
//     forged answers are ignored (Options.OnReject) and the wait goes on,
//     which is also why Call does not use nats.Request (first reply wins);
//   - the submitter runs only requests whose MAC verifies, refuses a request
//     id it has seen (replay) and one long past its deadline.
//
// What remains is confidentiality: arguments and outputs travel in clear
// over NATS, and whoever can read the jobs stream holds the secrets. Use NATS
// permissions (and TLS) to limit who may subscribe to <prefix>.client.> and
// read the jobs stream.
//
// # Failure modes
//
// No answer within the timeout is ErrNoAnswer, naming the reason ("did not
// answer" or "no submitter listening"): a clear tool error, never a hang.
// While nobody subscribes, the request is sent again with backoff (100 ms to
// 2 s) until the timeout, so a submitter that reconnects is still reached.
// Each time the worker's connection comes back (a NATS restart may have
// lost the request or the answer), the request is sent again; Serve sends
// the answer it gave again, never running a request id twice.
// An authentic answer larger than MaxAnswer is ErrAnswerTooLarge; Serve
// itself turns an oversize output (or one beyond NATS's max payload) into a
// tool error. Cancelling Call's context returns the context's error at once.
package clienttools
