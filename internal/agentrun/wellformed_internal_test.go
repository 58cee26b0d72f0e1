package agentrun

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
)

// wholeSurrogates replaces exactly the escapes encoding/json reads as
// U+FFFD, so the value read is the same before and after.
func TestWholeSurrogates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`"plain é \u00e9 \n \" \\"`, ``},
		{`"\ud83d\ude00 a whole pair"`, ``},
		{`"\uD83D\uDE00 upper case"`, ``},
		{`"\\ud83d an escaped backslash"`, ``},
		{`"\ud83d"`, `"\ufffd"`},
		{`"\uDC00 low alone"`, `"\ufffd low alone"`},
		{`"\ud83d\u0041 high before another"`, `"\ufffd\u0041 high before another"`},
		{`"\ud83d\ud83d\ude00 high before a pair"`, `"\ufffd\ud83d\ude00 high before a pair"`},
		{`"\\\ud83d backslash then a half"`, `"\\\ufffd backslash then a half"`},
		{`{"k\udc00":["\ud800",1,"\\u0022\ud83d"],"n":"ud83d"}`, `{"k\ufffd":["\ufffd",1,"\\u0022\ufffd"],"n":"ud83d"}`},
	} {
		got, changed := wholeSurrogates(json.RawMessage(tc.in))
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if string(got) != want || changed != (tc.want != "") {
			t.Errorf("wholeSurrogates(%s) = %s, %v; want %s", tc.in, got, changed, want)
			continue
		}
		var before, after any
		if err := json.Unmarshal([]byte(tc.in), &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &after); err != nil || !reflect.DeepEqual(before, after) {
			t.Errorf("%s reads as %v, %s as %v (%v)", tc.in, before, got, after, err)
		}
	}
}

// wellFormed leaves its input alone and copies only what it changes.
func TestWellFormedCopies(t *testing.T) {
	t.Parallel()
	half := json.RawMessage(`{"s":"\ud83d"}`)
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: "go"},
		{Role: llm.RoleAssistant, ReasoningContent: json.RawMessage(`"\udc00"`), ToolCalls: []llm.ToolCall{
			{ID: "a", Function: llm.FunctionCall{Name: "x", Arguments: "{}"}},
			{ID: "b", Function: llm.FunctionCall{Name: "x", Arguments: "{}"}, ExtraContent: half},
		}},
	}
	if got := wellFormed(msgs[:1]); &got[0] != &msgs[0] {
		t.Error("a history without halves was copied")
	}
	got := wellFormed(msgs)
	if string(msgs[1].ReasoningContent) != `"\udc00"` || string(msgs[1].ToolCalls[1].ExtraContent) != string(half) {
		t.Errorf("the input was modified: %+v", msgs[1])
	}
	if string(got[1].ReasoningContent) != `"\ufffd"` || string(got[1].ToolCalls[1].ExtraContent) != `{"s":"\ufffd"}` || got[1].ToolCalls[0].ID != "a" {
		t.Errorf("got %+v", got[1])
	}
}
