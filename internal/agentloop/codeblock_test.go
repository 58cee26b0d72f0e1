package agentloop_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

// In code mode a model may answer with its script in a fenced block
// instead of sending it to execute_code. The block was the job's final
// answer: the job succeeded with a piece of JavaScript and no tool ran
// (seen end to end with bin/worker and the scripted model). A block that
// calls a tool of the job now runs as an execute_code call, each such
// block one; a block that calls none, and the same reply outside code
// mode, are still an answer.
func TestCodeBlockInContentRuns(t *testing.T) {
	t.Parallel()
	const fence = "```"
	for _, tc := range []struct {
		name    string
		mode    agentloop.Mode
		content string
		runs    []string // the outputs of the executions, in order; none: the content is the answer
		rest    string   // the content left beside the calls
	}{
		{
			name:    "a javascript block",
			mode:    agentloop.ModeCode,
			content: "Let me check.\n" + fence + "javascript\nconst r = await tools.echo({text: \"hi\", repeat: 2});\nconsole.log(r)\n" + fence,
			runs:    []string{"hihi"},
			rest:    "Let me check.",
		},
		{
			name:    "a block of no language, a tool by its name",
			mode:    agentloop.ModeCode,
			content: fence + "\nreturn await tools[\"get_weather\"]({city: \"Lisbon\"})\n" + fence,
			runs:    []string{"weather in Lisbon: 21c, sunny"},
		},
		{
			name:    "two blocks",
			mode:    agentloop.ModeCode,
			content: fence + "js\nreturn await tools.echo({text: \"a\"})\n" + fence + "\nthen\n" + fence + "ts\nreturn await tools.echo({text: \"b\"})\n" + fence,
			runs:    []string{"a", "b"},
			rest:    "then",
		},
		{
			name:    "a block calling no tool of the job",
			mode:    agentloop.ModeCode,
			content: "Here is how:\n" + fence + "js\nawait tools.send_mail({to: \"x\"})\n" + fence,
		},
		{
			name:    "a block of another language",
			mode:    agentloop.ModeCode,
			content: fence + "python\nprint(1)\n" + fence,
		},
		{
			name:    "full mode",
			mode:    agentloop.ModeFull,
			content: fence + "javascript\nawait tools.echo({text: \"hi\"})\n" + fence,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, textReply(tc.content), textReply("Done."))
			var ev events
			res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Go.", Mode: tc.mode, Tools: tools, Sink: &ev})
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.runs) == 0 {
				if res.Answer != tc.content || len(s.Requests()) != 1 {
					t.Fatalf("answer %q after %d requests, want the content as the answer", res.Answer, len(s.Requests()))
				}
				return
			}
			if res.Answer != "Done." {
				t.Fatalf("answer %q, want Done. after the executions", res.Answer)
			}
			results := toolMessages(s.Requests()[1].Messages)
			if len(results) != len(tc.runs) {
				t.Fatalf("tool results %s, want %d", mustJSON(t, results), len(tc.runs))
			}
			for i, want := range tc.runs {
				if got := results[i].Content; got != want {
					t.Errorf("execution %d answered %q, want %q", i, got, want)
				}
			}
			turn := s.Requests()[1].Messages[1]
			if turn.Role != llm.RoleAssistant || len(turn.ToolCalls) != len(tc.runs) || turn.ToolCalls[0].Function.Name != agentloop.ToolExecuteCode || turn.Content != tc.rest {
				t.Errorf("history's turn %s, want %d execute_code calls and content %q", mustJSON(t, turn), len(tc.runs), tc.rest)
			}
			rec := ev.of(agentloop.EventContentCallRecovered)
			if len(rec) != 1 || !strings.Contains(mustJSON(t, rec[0].Data), `"shape":"code_block"`) {
				t.Errorf("content_call.recovered events %s, want one of shape code_block", mustJSON(t, rec))
			}
			for _, m := range reflect.Rewrite(res.Messages, res.Records) {
				for _, c := range m.ToolCalls {
					if c.Function.Name == agentloop.ToolExecuteCode {
						t.Errorf("the reflected transcript keeps %s", mustJSON(t, c))
					}
				}
			}
		})
	}
}

// In "on" mode the content is read beside tool_calls; a script sent to
// execute_code and shown in a fence as well (reindented) ran twice.
func TestCodeBlockBesideExecuteCodeRunsOnce(t *testing.T) {
	t.Parallel()
	const fence = "```"
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t, llmtest.Reply{
		Content:   "I run:\n" + fence + "js\n  const r = await tools.echo({text: \"hi\"});\n  return r\n" + fence,
		ToolCalls: []llm.ToolCall{call(agentloop.ToolExecuteCode, `{"code":"const r = await tools.echo({text: \"hi\"});\nreturn r"}`)},
	}, textReply("Done."))
	l := newLoop(t, s, agentloop.Config{ContentCalls: agentloop.ContentCalls{Default: agentloop.ContentCallsOn}})
	if _, err := l.Run(t.Context(), agentloop.Input{Task: "Go.", Mode: agentloop.ModeCode, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	if n := ts.calls.Load(); n != 1 {
		t.Errorf("echo ran %d times, want once", n)
	}
}
