package agentloop

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestExtractContentCalls(t *testing.T) {
	t.Parallel()
	schemas := map[string]string{
		"read_file": `{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"},"opts":{"type":"object"}}}`,
		"list_dir":  `{"type":"object","properties":{"path":{"type":["string","null"]}}}`,
	}
	known := func(n string) (json.RawMessage, bool) {
		s, ok := schemas[n]
		return json.RawMessage(s), ok
	}
	for _, tc := range []struct {
		name, content string
		want          []string // name(args) of each call
		rest          string
	}{
		{"plain text", "The answer is 42.", nil, "The answer is 42."},
		{"tag without JSON", "Use <tool_call> tags to call tools.", nil, "Use <tool_call> tags to call tools."},
		{"two hermes calls", `<tool_call>{"name":"read_file","arguments":{"path":"a"}}</tool_call>
<tool_call>{"name":"list_dir","arguments":{}}</tool_call>`, []string{`read_file({"path":"a"})`, `list_dir({})`}, ""},
		{"tagged unknown name kept", `<tool_call>{"name":"nope","arguments":{}}</tool_call>`, []string{`nope({})`}, ""},
		{"bare unknown name ignored", `{"name":"nope","arguments":{}}`, nil, `{"name":"nope","arguments":{}}`},
		{"fenced array", "Calling:\n```json\n[{\"name\":\"read_file\",\"arguments\":{\"path\":\"b\"}},{\"name\":\"list_dir\",\"arguments\":{\"path\":\".\"}}]\n```", []string{`read_file({"path":"b"})`, `list_dir({"path":"."})`}, "Calling:"},
		{"string arguments", `{"name":"read_file","arguments":"{\"path\":\"c\"}"}`, []string{`read_file({"path":"c"})`}, ""},
		{"broken JSON in tag", `<tool_call>{"name": "read_file", "arguments": {"path": c}}</tool_call>`, []string{`read_file({"path": c})`}, ""},
		{"tagged call without arguments", `<tool_call>{"name": "list_dir"}</tool_call>`, []string{`list_dir({})`}, ""},
		{"two calls in one tag", "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n{\"name\": \"list_dir\", \"arguments\": {}}\n</tool_call>", []string{`read_file({"path": "a"})`, `list_dir({})`}, ""},
		{"qwen3 coder xml", "Reading.\n<tool_call>\n<function=read_file>\n<parameter=path>\n 42 \n</parameter>\n<parameter=limit>\n5\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n</parameter>\n</function>\n</tool_call>", []string{`read_file({"path":" 42 ","limit":5,"opts":{"a":[1]}})`}, "Reading."},
		{"qwen3 coder xml, no parameters", "<tool_call>\n<function=list_dir>\n</function>\n</tool_call>", []string{`list_dir({})`}, ""},
		{"qwen3 coder xml, untyped string", "<function=list_dir>\n<parameter=path>\nsrc\n</parameter>\n</function>", []string{`list_dir({"path":"src"})`}, ""},
		{"llama function tag JSON", `<function=read_file>{"path": "a"}</function>`, []string{`read_file({"path": "a"})`}, ""},
		{"python tag with eom", `<|python_tag|>{"name": "read_file", "parameters": {"path": "a"}}<|eom_id|>`, []string{`read_file({"path": "a"})`}, ""},
		{"tag mentioned in thinking", "<think>I could use <tool_call> here.</think>\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>", []string{`read_file({"path": "a"})`}, "<think>I could use <tool_call> here.</think>"},
		{"trailing text after bare JSON", `{"name":"read_file","arguments":{}} and more`, nil, `{"name":"read_file","arguments":{}} and more`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls, rest := extractContentCalls(tc.content, 3, known)
			var got []string
			for _, c := range calls {
				got = append(got, c.Function.Name+"("+c.Function.Arguments+")")
				if !strings.HasPrefix(c.ID, "call003") || len(c.ID) != 9 || c.Type != "function" {
					t.Errorf("call id/type = %q/%q", c.ID, c.Type)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || rest != tc.rest {
				t.Errorf("got %v rest %q; want %v rest %q", got, rest, tc.want, tc.rest)
			}
		})
	}
}

// FuzzExtractContentCalls: any content is either left as it is or turned
// into calls with names, ids and a remainder shorter than the content.
func FuzzExtractContentCalls(f *testing.F) {
	for _, s := range []string{
		`<tool_call>{"name":"read_file","arguments":{"path":"a"}}</tool_call>`,
		"<tool_call>\n<function=read_file>\n<parameter=path>\nx\n</parameter>\n</function>\n</tool_call>",
		`<function=list_dir>{}</function>`, `[TOOL_CALLS][{"name":"a","arguments":{}}]`,
		`<|python_tag|>{"name":"a","parameters":{}}<|eom_id|>`, "```json\n{\"name\":\"list_dir\",\"arguments\":{}}\n```",
		`{"name":"list_dir","arguments":{}}`, "<think><tool_call></think>", "<tool_call>{\"name\": \"x\", \"arguments\": {",
	} {
		f.Add(s)
	}
	known := func(n string) (json.RawMessage, bool) {
		return json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`), n == "read_file" || n == "list_dir"
	}
	f.Fuzz(func(t *testing.T, content string) {
		calls, rest := extractContentCalls(content, 1, known)
		if len(calls) == 0 {
			if rest != content {
				t.Fatalf("no calls but content changed: %q -> %q", content, rest)
			}
			return
		}
		if len(rest) >= len(content) {
			t.Fatalf("calls taken but rest %q not shorter than %q", rest, content)
		}
		for _, c := range calls {
			if c.Function.Name == "" || c.ID == "" {
				t.Fatalf("call without name or id: %+v from %q", c, content)
			}
		}
	})
}
