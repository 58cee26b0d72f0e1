package reflect

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
)

func str(s string) *string { return &s }

func asst(content string, calls ...llm.ToolCall) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Content: content, ToolCalls: calls}
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: args}}
}

func result(id, name, content string) llm.Message {
	return llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: name, Content: content}
}

func user(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRewrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msgs []llm.Message
		recs []Record
		want []llm.Message
	}{
		{
			name: "no records leaves everything",
			msgs: []llm.Message{user("hi"), asst("", call("c1", "echo", `{"x":1}`)), result("c1", "echo", "1"), asst("done")},
			want: []llm.Message{user("hi"), asst("", call("c1", "echo", `{"x":1}`)), result("c1", "echo", "1"), asst("done")},
		},
		{
			name: "call_tool becomes the real call",
			msgs: []llm.Message{
				user("read it"),
				asst("let me look", call("c1", "call_tool", `{"name":"read_file","arguments":{"path":"/a"}}`)),
				result("c1", "call_tool", "hello"),
				asst("it says hello"),
			},
			recs: []Record{{ID: "r1", CallID: "c1", Kind: KindCallTool, Name: "read_file", Input: json.RawMessage(`{"path":"/a"}`), Output: str("hello")}},
			want: []llm.Message{
				user("read it"),
				asst("let me look", call("r1", "read_file", `{"path":"/a"}`)),
				result("r1", "read_file", "hello"),
				asst("it says hello"),
			},
		},
		{
			name: "execute_code inner calls become several calls in order; printout dropped",
			msgs: []llm.Message{
				user("sum"),
				asst("", call("c1", "execute_code", `{"code":"..."}`)),
				result("c1", "execute_code", "total 3"),
			},
			recs: []Record{
				{ID: "r1", CallID: "c1", Kind: KindCode, Name: "get", Input: json.RawMessage(`{"k":"a"}`), Output: str("1")},
				{ID: "r2", CallID: "c1", Kind: KindCode, Name: "get", Input: json.RawMessage(`{"k":"b"}`), Output: str("2")},
				{ID: "r3", CallID: "c1", Kind: KindCode, Name: "log", Input: json.RawMessage(`{}`), Output: str("boom"), IsError: true},
			},
			want: []llm.Message{
				user("sum"),
				asst("", call("r1", "get", `{"k":"a"}`), call("r2", "get", `{"k":"b"}`), call("r3", "log", `{}`)),
				result("r1", "get", "1"), result("r2", "get", "2"), result("r3", "log", "boom"),
			},
		},
		{
			name: "only the reflected call of a parallel batch changes, positions kept",
			msgs: []llm.Message{
				asst("", call("a", "echo", `{}`), call("b", "execute_code", `{"code":""}`), call("c", "echo", `{"z":1}`)),
				result("a", "echo", "A"), result("b", "execute_code", "printed"), result("c", "echo", "C"),
			},
			recs: []Record{
				{ID: "b1", CallID: "b", Kind: KindCode, Name: "x", Input: json.RawMessage(`{"i":1}`), Output: str("X1")},
				{ID: "b2", CallID: "b", Kind: KindCode, Name: "y", Input: json.RawMessage(`{"i":2}`), Output: str("Y2")},
			},
			want: []llm.Message{
				asst("", call("a", "echo", `{}`), call("b1", "x", `{"i":1}`), call("b2", "y", `{"i":2}`), call("c", "echo", `{"z":1}`)),
				result("a", "echo", "A"), result("b1", "x", "X1"), result("b2", "y", "Y2"), result("c", "echo", "C"),
			},
		},
		{
			name: "client tool keeps name and arguments, output is the submitter's answer",
			msgs: []llm.Message{asst("", call("c1", "weather", `{"city":"Oslo"}`)), result("c1", "weather", "pending")},
			recs: []Record{{CallID: "c1", Kind: KindClientTool, Name: "weather", Output: str("rain")}},
			want: []llm.Message{asst("", call("c1", "weather", `{"city":"Oslo"}`)), result("c1", "weather", "rain")},
		},
		{
			name: "missing output leaves the call as the model saw it",
			msgs: []llm.Message{asst("", call("c1", "call_tool", `{"name":"t"}`)), result("c1", "call_tool", "timeout")},
			recs: []Record{{ID: "r1", CallID: "c1", Kind: KindCallTool, Name: "t", Input: json.RawMessage(`{}`)}},
			want: []llm.Message{asst("", call("c1", "call_tool", `{"name":"t"}`)), result("c1", "call_tool", "timeout")},
		},
		{
			name: "missing name leaves the call",
			msgs: []llm.Message{asst("", call("c1", "call_tool", `{"name":""}`)), result("c1", "call_tool", "unknown tool")},
			recs: []Record{{ID: "r1", CallID: "c1", Kind: KindCallTool, Output: str("unknown tool")}},
			want: []llm.Message{asst("", call("c1", "call_tool", `{"name":""}`)), result("c1", "call_tool", "unknown tool")},
		},
		{
			name: "one incomplete inner call leaves the whole execute_code",
			msgs: []llm.Message{asst("", call("c1", "execute_code", `{}`)), result("c1", "execute_code", "partial")},
			recs: []Record{
				{ID: "r1", CallID: "c1", Kind: KindCode, Name: "a", Output: str("ok")},
				{ID: "r2", CallID: "c1", Kind: KindCode, Name: "b"},
			},
			want: []llm.Message{asst("", call("c1", "execute_code", `{}`)), result("c1", "execute_code", "partial")},
		},
		{
			name: "empty ids fall back to the call id",
			msgs: []llm.Message{
				asst("", call("c1", "call_tool", `{}`), call("c2", "execute_code", `{}`)),
				result("c1", "call_tool", "o1"), result("c2", "execute_code", "o2"),
			},
			recs: []Record{
				{CallID: "c1", Kind: KindCallTool, Name: "t", Output: str("T")},
				{CallID: "c2", Kind: KindCode, Name: "u", Input: json.RawMessage(`{"n":1}`), Output: str("U1")},
				{CallID: "c2", Kind: KindCode, Name: "u", Input: json.RawMessage(`{"n":2}`), Output: str("U2")},
			},
			want: []llm.Message{
				asst("", call("c1", "t", `{}`), call("c2_1", "u", `{"n":1}`), call("c2_2", "u", `{"n":2}`)),
				result("c1", "t", "T"), result("c2_1", "u", "U1"), result("c2_2", "u", "U2"),
			},
		},
		{
			name: "record ids colliding with a call id are ignored",
			msgs: []llm.Message{
				asst("", call("a", "call_tool", `{}`), call("b", "call_tool", `{}`)),
				result("a", "call_tool", "A"), result("b", "call_tool", "B"),
			},
			recs: []Record{
				{ID: "b", CallID: "a", Kind: KindCallTool, Name: "x", Output: str("X")},
				{ID: "r", CallID: "b", Kind: KindCallTool, Name: "y", Output: str("Y")},
			},
			want: []llm.Message{
				asst("", call("a", "call_tool", `{}`), call("r", "y", `{}`)),
				result("a", "call_tool", "A"), result("r", "y", "Y"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := mustJSON(t, tt.msgs)
			got := Rewrite(tt.msgs, tt.recs)
			if g, w := mustJSON(t, got), mustJSON(t, tt.want); g != w {
				t.Errorf("Rewrite:\n got %s\nwant %s", g, w)
			}
			if after := mustJSON(t, tt.msgs); after != before {
				t.Errorf("Rewrite modified its input:\n%s\n%s", before, after)
			}
			if g, w := mustJSON(t, Rewrite(got, tt.recs)), mustJSON(t, got); g != w {
				t.Errorf("not idempotent:\n once %s\ntwice %s", w, g)
			}
		})
	}
}

func TestIgnore(t *testing.T) {
	t.Parallel()
	recs := []Record{
		{ID: "ok", CallID: "c0", Name: "fine", Output: str("x")},
		{ID: "r1", CallID: "c1", Name: "t"},
		{ID: "r2", CallID: "c2", Output: str("x")},
		{ID: "r3", Name: "t", Output: str("x")},
		{ID: "dup", CallID: "c4", Name: "t", Output: str("x")},
		{ID: "dup", CallID: "c5", Name: "t", Output: str("x")},
	}
	got := Ignore(recs)
	want := map[string]string{
		"r1":  "no output",
		"r2":  "no name",
		"r3":  "no call id",
		"dup": "more than one record",
	}
	if len(got) != 5 {
		t.Fatalf("Ignore returned %d records, want 5: %+v", len(got), got)
	}
	for _, ig := range got {
		if !strings.Contains(ig.Reason, want[ig.Record.ID]) {
			t.Errorf("record %s: reason %q, want it to mention %q", ig.Record.ID, ig.Reason, want[ig.Record.ID])
		}
	}
}

func TestTranscriptJSON(t *testing.T) {
	t.Parallel()
	tr := Transcript{
		Messages: []llm.Message{asst("", call("c1", "call_tool", `{}`)), result("c1", "call_tool", "o")},
		Records:  []Record{{ID: "r1", CallID: "c1", Kind: KindCallTool, Name: "real", Input: json.RawMessage(`{"a":1}`), Output: str("o")}},
	}
	var back Transcript
	if err := json.Unmarshal([]byte(mustJSON(t, tr)), &back); err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, back.Reflected()), mustJSON(t, tr.Reflected()); g != w {
		t.Errorf("reflection changed across a JSON round trip:\n%s\n%s", g, w)
	}
	if got := back.Reflected()[0].ToolCalls[0].Function.Name; got != "real" {
		t.Errorf("reflected name %q, want real", got)
	}
}
