package toolcache

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// hostileServerEnv makes the test binary run as a badly written (or
// malicious) stdio MCP server that speaks JSON-RPC by hand, so it can do
// what no mcp-go server would: hang in initialize, write garbage, loop its
// cursors, flood notifications. The value is the behaviour:
//
//	noinit        reads requests and never answers any
//	garbage       writes non-JSON lines and a partial line, then serves
//	stderrflood   writes to stderr without pause while serving
//	exitafterlist answers initialize and tools/list, then exits
//	listflood     after initialize, sends notifications/tools/list_changed
//	              without pause (and serves)
//	cursorloop    tools/list pages A -> B -> A forever
//	hugelist      12,000 tools
//	bigschema     one tool with a 5 MB input schema (5,000 properties)
//	bigresult     tools/call answers 10 MiB of text
//	endlessresult tools/call answers a line that does not end (up to 1 GiB)
//	endlessinit   initialize is answered so
//	names         tool names that collide after sanitising, unicode, spaces,
//	              200 characters, a duplicate, an empty name
//	oddresults    tools/call answers isError without content, content of an
//	              unknown type, a resource link, structuredContent nested
//	              deeper than maxJSONNesting (echo("deep"))
//	deeplist      a tool whose input schema nests deeper than maxJSONNesting
//	listerror     tools/list answers an error whose message is 5 MiB
//	schemas       tool definitions mcp-go cannot decode (undecodableTools)
//	              beside good ones
//	hangresources announces resources and never answers resources/list
//	              (nor any resources/ request); serves tools and pings
//	uncallable    tools no call can (or should) reach (uncallableTools) beside good
//	              ones; echo("emptyerror") answers isError with empty
//	              content, echo("blankerror") with a text of blanks,
//	              echo("listchanged") sends notifications/tools/list_changed
//
// Every server that serves has the tool echo(text); echo("huge") and
// echo("hugelast") answer with a text over maxMessageBytes. hostileCountEnv, when
// set, is a file to which each start appends a line (to count restarts).
const (
	hostileServerEnv = "TOOLCACHE_TEST_HOSTILE"
	hostileCountEnv  = "TOOLCACHE_TEST_HOSTILE_COUNT"
)

// undecodableTools are tool definitions mcp-go's mcp.Tool cannot decode,
// each named bad_*, and one more definition of echo, which comes first.
var undecodableTools = []string{
	`{"name":"echo","inputSchema":"not a schema"}`,
	`{"name":"bad_string","inputSchema":"x"}`,
	`{"name":"bad_bool","inputSchema":true}`,
	`{"name":"bad_type","inputSchema":{"type":5}}`,
	`{"name":"bad_required","inputSchema":{"type":"object","required":"x"}}`,
	`{"name":"bad_hint","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":"yes"}}`,
}

// uncallableTools are tool definitions mcp-go decodes but no call can
// use (or only at a cost no call is worth), each named bad_*, then two
// that are fine. The server adds bad_deep, an input schema nested more
// than MaxSchemaDepth levels, and deep_enough, one just within; bad_wide,
// one of more than MaxSchemaObjects objects, and wide_enough, one of as many.
var uncallableTools = []string{
	`{"name":"bad_string_type","inputSchema":{"type":"string"}}`,
	`{"name":"bad_type_list","inputSchema":{"type":["object","null"],"properties":{}}}`,
	`{"name":"bad_array_type","inputSchema":{"type":"array","items":{"type":"string"}}}`,
	`{"name":"bad_task_only","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`,
	`{"name":"task_optional","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}`,
	`{"name":"no_type","inputSchema":{"properties":{"q":{"type":"string"}}}}`,
}

// deepSchema is an input schema nested 2*levels+1 levels deep.
func deepSchema(levels int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"type":"object","properties":{"x":`, levels) + `{"type":"string"}` + strings.Repeat(`}}`, levels))
}

func hostileServer(mode string, env map[string]string) ServerConfig {
	e := map[string]string{hostileServerEnv: mode, "GORACE": "atexit_sleep_ms=0"}
	for k, v := range env {
		e[k] = v
	}
	return ServerConfig{Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: e}
}

func serveHostile(mode string) int {
	if f := os.Getenv(hostileCountEnv); f != "" {
		if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(fh, os.Getpid())
			fh.Close()
		}
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	var mu sync.Mutex
	send := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		_, _ = out.Write(b)
		_ = out.WriteByte('\n')
		_ = out.Flush()
	}
	// endless writes the start of an answer to id and then up to 1 GiB
	// without a newline: at most that, so that a client without a bound
	// fails the test rather than the machine.
	endless := func(id json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id)
		chunk := strings.Repeat("x", 1<<20)
		for range 1024 {
			if _, err := out.WriteString(chunk); err != nil {
				return
			}
		}
		_ = out.Flush()
	}
	raw := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = out.WriteString(s)
		_ = out.Flush()
	}
	if mode == "stderrflood" {
		go func() {
			line := strings.Repeat("noise ", 100) + "\n"
			for {
				if _, err := os.Stderr.WriteString(line); err != nil {
					return
				}
			}
		}()
	}
	echo := map[string]any{"name": "echo", "description": "Echo the text back.",
		"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}}
	tools := func(cursor string) (list []any, next string) {
		switch mode {
		case "cursorloop":
			if cursor == "A" {
				return []any{echo}, "B"
			}
			return []any{echo}, "A"
		case "hugelist":
			list = []any{echo}
			for i := range 12000 {
				list = append(list, map[string]any{"name": "tool_" + strconv.Itoa(i), "description": "Generated tool number " + strconv.Itoa(i),
					"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "integer"}}}})
			}
			return list, ""
		case "bigschema":
			// Built as text: marshalling a map this size under -race is slow.
			var b strings.Builder
			b.WriteString(`{"type":"object","properties":{`)
			// 5,000 properties of 1 KB each: within MaxSchemaObjects (60,000
			// small ones, as before, are left out: see TestUncallableToolsLeftOut).
			pad := strings.Repeat("padding ", 128)
			for i := range 5000 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `"field_with_a_long_name_%d":{"type":"string","description":"%s"}`, i, pad)
			}
			b.WriteString(`}}`)
			return []any{echo, map[string]any{"name": "big", "inputSchema": json.RawMessage(b.String())}}, ""
		case "schemas":
			var list []any
			for _, d := range undecodableTools {
				list = append(list, json.RawMessage(d))
			}
			return append(list, echo, json.RawMessage(`{"name":"no_schema"}`)), ""
		case "uncallable":
			list = []any{echo}
			for _, d := range uncallableTools {
				list = append(list, json.RawMessage(d))
			}
			list = append(list, map[string]any{"name": "bad_deep", "inputSchema": deepSchema(MaxSchemaDepth / 2)},
				map[string]any{"name": "deep_enough", "inputSchema": deepSchema(MaxSchemaDepth/2 - 1)})
			wide := func(objects int) json.RawMessage { // the root, properties and objects-2 empty subschemas
				var b strings.Builder
				b.WriteString(`{"type":"object","properties":{`)
				for i := range objects - 2 {
					if i > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `"f%d":{}`, i)
				}
				b.WriteString(`}}`)
				return json.RawMessage(b.String())
			}
			list = append(list, map[string]any{"name": "bad_wide", "inputSchema": wide(MaxSchemaObjects + 1)},
				map[string]any{"name": "wide_enough", "inputSchema": wide(MaxSchemaObjects)})
			return list, ""
		case "names":
			list = []any{echo}
			for _, n := range []string{"a.b", "a b", "a/b", "a-b", "日本語", "emoji🙂", "with space", strings.Repeat("x", 200), strings.Repeat("x", 199) + "y", "dup", "dup", ""} {
				list = append(list, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
			}
			return list, ""
		}
		return []any{echo}, ""
	}
	var lists atomic.Int64 // tools/list requests seen
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor    string         `json:"cursor"`
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &req) != nil || len(req.ID) == 0 {
			if req.Method == "notifications/initialized" && mode == "listflood" {
				go func() {
					n := map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
					for {
						send(n)
					}
				}()
			}
			continue
		}
		if mode == "noinit" {
			continue
		}
		reply := func(result any) { send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}) }
		switch req.Method {
		case "initialize":
			if mode == "endlessinit" {
				endless(req.ID)
				return 0
			}
			if mode == "garbage" {
				raw("this is not JSON\n{\"jsonrpc\":\"2.0\",\"id\":\n\x00\x01\x02 binary\n[1,2,3]\n\"a string\"\n{}\n")
			}
			caps := map[string]any{"tools": map[string]any{"listChanged": true}}
			if mode == "hangresources" {
				caps["resources"] = map[string]any{}
			}
			reply(map[string]any{"protocolVersion": "2025-11-25", "serverInfo": map[string]any{"name": mode, "version": "0"},
				"capabilities": caps})
		case "tools/list":
			lists.Add(1)
			if mode == "listerror" {
				send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32603, "message": "listing failed: " + strings.Repeat("x", 5<<20)}})
				continue
			}
			if mode == "deeplist" { // json.Marshal refuses what it would not decode
				raw(`{"id":` + string(req.ID) + `,"jsonrpc":"2.0","result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},` +
					`{"name":"deep","inputSchema":` + string(deepSchema(maxJSONNesting/2)) + "}]}}\n")
				continue
			}
			list, next := tools(req.Params.Cursor)
			res := map[string]any{"tools": list}
			if next != "" {
				res["nextCursor"] = next
			}
			reply(res)
			if mode == "exitafterlist" {
				return 0
			}
			if mode == "garbage" {
				raw("{\"partial\": tr") // a line cut off; the next message follows it
			}
		case "tools/call":
			switch {
			case mode == "endlessresult":
				endless(req.ID)
				return 0
			case mode == "bigresult":
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("0123456789", 1<<20)}}})
			case fmt.Sprint(req.Params.Arguments["text"]) == "huge":
				// An answer over the message bound, id first (json.Marshal
				// sorts a map's keys), then the TypeScript SDK's order, id last.
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("x", maxMessageBytes+1<<20)}}})
			case fmt.Sprint(req.Params.Arguments["text"]) == "hugelast":
				raw(`{"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", maxMessageBytes+1<<20) + `"}]},"jsonrpc":"2.0","id":` + string(req.ID) + "}\n")
			case fmt.Sprint(req.Params.Arguments["text"]) == "lists":
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": strconv.FormatInt(lists.Load(), 10)}}})
			case mode == "uncallable" && fmt.Sprint(req.Params.Arguments["text"]) == "listchanged":
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": "sent"}}})
			case mode == "uncallable" && fmt.Sprint(req.Params.Arguments["text"]) == "emptyerror":
				reply(map[string]any{"content": []any{}, "isError": true})
			case mode == "uncallable" && fmt.Sprint(req.Params.Arguments["text"]) == "blankerror":
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": " \n "}}, "isError": true})
			case mode == "oddresults" && req.Params.Name == "echo":
				switch fmt.Sprint(req.Params.Arguments["text"]) {
				case "iserror":
					reply(map[string]any{"isError": true})
				case "unknown":
					reply(map[string]any{"content": []any{map[string]any{"type": "hologram", "data": "x"}, map[string]any{"type": "text", "text": "after"}}})
				case "deep":
					// And a notification as deep, in the same write.
					raw(`{"id":` + string(req.ID) + `,"jsonrpc":"2.0","result":{"content":[],"structuredContent":` + string(deepSchema(maxJSONNesting/2)) + "}}\n" +
						`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":` + string(deepSchema(maxJSONNesting/2)) + "}}\n")
				case "link":
					reply(map[string]any{"content": []any{map[string]any{"type": "resource_link", "uri": "file:///etc/hosts", "name": "hosts", "mimeType": "text/plain"}}})
				}
			default:
				reply(map[string]any{"content": []any{map[string]any{"type": "text", "text": fmt.Sprint(req.Params.Arguments["text"])}}})
			}
		case "ping":
			reply(map[string]any{})
		case "resources/list", "resources/templates/list", "resources/read":
			if mode != "hangresources" {
				send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
			}
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
	}
}
