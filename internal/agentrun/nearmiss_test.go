package agentrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// nearMissCorpus is agentloop's testdata/nearmiss.json.
type nearMissCorpus struct {
	Tools   map[string]json.RawMessage `json:"tools"`
	Entries []struct {
		Name    string `json:"name"`
		Content string `json:"content"`
		Expect  string `json:"expect"`
		Want    []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"want"`
	} `json:"entries"`
}

// The recovery fallback of the script: a well-formed call of one of the
// corpus's tools.
const fixedCall = `{"city":"Lima"}`

// Every entry of the near-miss corpus, end to end through NATS with the
// scripted model and a real MCP server whose schemas the calls must meet:
// a near-miss call ends in the right tool calls and a successful job (a
// schema slip after one ephemeral retry), debris in one re-ask and then
// success, an answer as the answer; an answer of pure debris that survives
// the re-ask fails the job with the reason.
func TestNearMissCorpusThroughNATS(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../agentloop/testdata/nearmiss.json")
	if err != nil {
		t.Fatal(err)
	}
	var corpus nearMissCorpus
	if err := json.Unmarshal(b, &corpus); err != nil {
		t.Fatal(err)
	}
	const debrisJob = "debris-twice"
	debris := "tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": Lima}}"

	h := start(t, agentloop.Config{}, agentrun.Config{Pool: corpusPool(t, corpus.Tools)})
	// The script answers from the request alone (jobs run concurrently):
	// the task names the entry; a tool result is answered with what the
	// tools returned, a re-ask or schema retry with a well-formed call.
	h.model.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
		task := r.Messages[slices.IndexFunc(r.Messages, func(m llm.Message) bool { return m.Role == llm.RoleUser })].Content
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == llm.RoleTool:
			var outs []string
			for _, m := range r.Messages {
				if m.Role == llm.RoleTool {
					outs = append(outs, m.Content)
				}
			}
			return llmtest.Reply{Content: "done: " + strings.Join(outs, " | ")}
		case last.Content != task && task == debrisJob:
			return llmtest.Reply{Content: `get_weather("Lima")`}
		case last.Content != task: // the note of a re-ask or a schema retry
			return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "get_weather", Arguments: fixedCall}}}}
		case task == debrisJob:
			return llmtest.Reply{Content: debris}
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(task, "corpus entry "))
		return llmtest.Reply{Content: corpus.Entries[i].Content}
	})

	for i, e := range corpus.Entries {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("nm-%d", i)
			st := h.run(t, &jobs.Job{ID: id, Task: fmt.Sprintf("corpus entry %d", i)})
			if st.Status != jobs.StatusSucceeded || st.Result == nil {
				t.Fatalf("status %s (%s)", st.Status, st.Error)
			}
			var want []string
			switch e.Expect {
			case "call":
				for _, w := range e.Want {
					want = append(want, w.Name+canonical(t, w.Arguments))
				}
			case "retry", "reask":
				want = []string{"get_weather" + canonical(t, json.RawMessage(fixedCall))}
			}
			wantAnswer := "done: " + strings.Join(want, " | ")
			if e.Expect == "answer" {
				wantAnswer = e.Content
			}
			if st.Result.Answer != wantAnswer {
				t.Errorf("answer %q\nwant   %q", st.Result.Answer, wantAnswer)
			}
			types := eventTypes(t, h, id)
			recovered, reasks := types[agentloop.EventContentCallRecovered], types[agentloop.EventContentCallReask]
			switch {
			case e.Expect == "call" && (recovered != 1 || reasks != 0),
				e.Expect == "retry" && (types[agentloop.EventToolSchemaRetry] != 1 || reasks != 0),
				e.Expect == "reask" && reasks != 1,
				e.Expect == "answer" && (recovered != 0 || reasks != 0):
				t.Errorf("%s: events %v", e.Expect, types)
			}
		})
	}
	t.Run("debris survives the re-ask", func(t *testing.T) {
		t.Parallel()
		st := h.run(t, &jobs.Job{ID: debrisJob, Task: debrisJob})
		if st.Status != jobs.StatusFailed || !strings.Contains(st.Error, "could not be read, also when asked again") ||
			!strings.Contains(st.Error, "get_weather") {
			t.Fatalf("status %s, error %q", st.Status, st.Error)
		}
		if n := eventTypes(t, h, debrisJob)[agentloop.EventContentCallReask]; n != 1 {
			t.Errorf("%d re-asks", n)
		}
	})
}

// canonical is args as the test tools echo them (sorted keys).
func canonical(t *testing.T, args json.RawMessage) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(args, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// eventTypes counts the job's events by type.
func eventTypes(t *testing.T, h *harness, id string) map[string]int {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int{}
	if _, err := h.client.Watch(natstest.Context(t), id, func(ev jobs.Event) {
		mu.Lock()
		n[ev.Type]++
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// corpusPool serves the corpus's tools from an in-process mcp-go server
// through a real toolcache pool; each tool answers with its name and its
// arguments (sorted keys).
func corpusPool(t *testing.T, tools map[string]json.RawMessage) *toolcache.Pool {
	t.Helper()
	s := server.NewMCPServer("nearmiss", "1.0.0", server.WithToolCapabilities(true))
	for name, schema := range tools {
		s.AddTool(mcp.NewToolWithRawSchema(name, "Test tool "+name+".", schema),
			func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				b, _ := json.Marshal(req.GetArguments())
				return mcp.NewToolResultText(name + string(b)), nil
			})
	}
	return inProcessPool(t, "nearmiss", s)
}

// inProcessPool serves s as server name through a real toolcache pool
// (the in-process transport), closed with the test.
func inProcessPool(t *testing.T, name string, s *server.MCPServer) *toolcache.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := toolcache.NewPool(ctx, toolcache.Config{},
		toolcache.WithInProcessServer(name, s, toolcache.ServerConfig{}),
		toolcache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool close: %v", err)
		}
	})
	return p
}
