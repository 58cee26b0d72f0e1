package agentloop

import (
	"strings"
	"testing"
)

func TestExtractContentCalls(t *testing.T) {
	t.Parallel()
	known := func(n string) bool { return n == "read_file" || n == "list_dir" }
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
		{"trailing text after bare JSON", `{"name":"read_file","arguments":{}} and more`, nil, `{"name":"read_file","arguments":{}} and more`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls, rest := extractContentCalls(tc.content, 3, known)
			var got []string
			for _, c := range calls {
				got = append(got, c.Function.Name+"("+c.Function.Arguments+")")
				if !strings.HasPrefix(c.ID, "call_content_3_") || c.Type != "function" {
					t.Errorf("call id/type = %q/%q", c.ID, c.Type)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || rest != tc.rest {
				t.Errorf("got %v rest %q; want %v rest %q", got, rest, tc.want, tc.rest)
			}
		})
	}
}
