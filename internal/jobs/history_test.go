package jobs

import (
	"errors"
	"strings"
	"testing"
)

// TestHistoryMustBeAChatHistory: a history a provider would refuse (a
// result for no call, a call left unanswered) is refused at the door with
// where, not after a worker took the job and its first request got a 400.
func TestHistoryMustBeAChatHistory(t *testing.T) {
	t.Parallel()
	v, err := NewValidator(DefaultMaxJobBytes)
	if err != nil {
		t.Fatal(err)
	}
	call := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{}"}}]}`
	result := `{"role":"tool","tool_call_id":"c1","content":"2"}`
	for _, tt := range []struct {
		name, history, want string
	}{
		{"call and result", `[{"role":"user","content":"hi"},` + call + `,` + result + `]`, ""},
		{"orphan result", `[{"role":"user","content":"hi"},` + result + `]`, `history[1]: a tool result for call "c1"`},
		{"unanswered call", `[{"role":"user","content":"hi"},` + call + `,{"role":"user","content":"and?"}]`, `history[1]: call "c1" (add) has no tool result`},
		{"result twice", `[` + call + `,` + result + `,` + result + `]`, `history[2]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := v.DecodeJob([]byte(`{"task":"t","history":` + tt.history + `}`))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("DecodeJob: %v", err)
			case tt.want == "":
			case !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), tt.want):
				t.Errorf("DecodeJob: %v, want a schema error saying %q", err, tt.want)
			}
		})
	}
}
