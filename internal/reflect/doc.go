// Package reflect rewrites a transcript so that it shows the tool calls that
// really happened, under their real names.
//
// The model often reaches a tool indirectly: through the call_tool meta tool
// (search mode), from inside execute_code (code mode), or as a client tool
// that the submitter answers over NATS. While it runs, the agent loop records
// each such invocation as a Record {id, call_id, kind, name, input, output}.
// Rewrite turns the records into ordinary assistant tool calls and tool
// results, so a later job that takes the transcript as history sees the calls
// it really made, with the schema-free shape every provider accepts:
//
//	raw:       assistant call_tool({"name":"read_file","arguments":{...}})  →  tool "text"
//	reflected: assistant read_file({...})                                    →  tool "text"
//
// Everything else is left byte-equal; a record without its payload leaves its
// call as the model saw it; and Rewrite is idempotent, so reflecting a stored
// reflected transcript (for example one given back as history) changes
// nothing. The raw transcript (what the model saw) is stored beside the
// reflected one by the caller; this package only computes the latter.
//
// The code executed by execute_code and what it printed are not part of the
// reflected transcript (see Rewrite for why); the raw transcript keeps them.
package reflect
