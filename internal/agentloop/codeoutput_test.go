package agentloop_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// What an execution prints and returns is cut by codemode (Limits.MaxOutput)
// with markers saying what was left out, and the final value keeps its
// share. With the defaults (20,000 bytes of code output, 16 KiB of tool
// output) the loop cut that text again at MaxToolOutput: the markers and
// the value at its end were lost, and the model read "the first 16318 of
// 20000 bytes are shown" for a script that printed 100 MB (seen end to end
// with bin/worker). The execution's output now fits the tool output limit,
// error message included, so codemode's cut is the only one.
func TestCodeOutputFitsToolOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		cfg       agentloop.Config
		code      string
		want      []string // in the tool message the model gets
		wantStart string
	}{
		{
			name: "console lines then a value",
			code: `for (let i = 0; i < 1000; i++) console.log("line " + i + " " + "k".repeat(20)); return "the final value"`,
			want: []string{"line 0 ", "console lines not shown or cut", "the final value"},
		},
		{
			name: "a value of 5 MiB",
			code: `return "z".repeat(5 << 20)`,
			want: []string{"zzz", "the final value is 5242880 bytes"},
		},
		{
			name: "100 lines of 1 MiB",
			code: `const s = "x".repeat(1 << 20); for (let i = 0; i < 100; i++) console.log(s)`,
			want: []string{"xxx", "100 console lines not shown or cut"},
		},
		{
			name:      "a long error after long output",
			code:      `console.log("y".repeat(30000)); throw "e".repeat(1000000)`,
			want:      []string{"Output before the error:", "yyy", "console lines not shown or cut"},
			wantStart: `Error: Uncaught "eee`,
		},
		{
			name:      "a short error after long output",
			code:      `console.log("y".repeat(30000)); throw new Error("boom")`,
			want:      []string{"boom", "Output before the error:", "console lines not shown or cut"},
			wantStart: "Error: Uncaught Error: boom",
		},
		{
			name: "a code output limit below the tool output limit",
			cfg:  agentloop.Config{CodeLimits: codemode.Limits{MaxOutput: 4000}},
			code: `for (let i = 0; i < 1000; i++) console.log("line " + i); return "the final value"`,
			want: []string{"line 0", "the output limit is 4000 bytes", "the final value"},
		},
		{
			name: "a small tool output limit",
			cfg:  agentloop.Config{MaxToolOutput: 2000},
			code: `for (let i = 0; i < 1000; i++) console.log("line " + i); return "the final value"`,
			want: []string{"line 0", "console lines not shown or cut", "the final value"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, toolReply(codeCall(tc.code)), textReply("Done."))
			if _, err := newLoop(t, s, tc.cfg).Run(t.Context(), agentloop.Input{Task: "Print a lot.", Mode: agentloop.ModeCode, Tools: tools}); err != nil {
				t.Fatal(err)
			}
			results := toolMessages(s.Requests()[1].Messages)
			if len(results) != 1 {
				t.Fatalf("tool messages %s", mustJSON(t, results))
			}
			got := results[0].Content
			limit := tc.cfg.MaxToolOutput
			if limit == 0 {
				limit = agentloop.DefaultMaxToolOutput
			}
			if len(got) > limit {
				t.Errorf("the model got %d bytes, above the tool output limit %d", len(got), limit)
			}
			if strings.Contains(got, "[output truncated: the first") {
				t.Errorf("the loop cut codemode's output again; the model got ...%q", tail(got))
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("the model got no %q: ...%q", w, tail(got))
				}
			}
			if !strings.HasPrefix(got, tc.wantStart) {
				t.Errorf("the model got %q..., want it to start with %q", got[:min(len(got), 80)], tc.wantStart)
			}
		})
	}
}

func tail(s string) string { return s[max(0, len(s)-300):] }
