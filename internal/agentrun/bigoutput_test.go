package agentrun_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// A tool output larger than the server's max_payload goes through the
// whole path: journaled as an object (a KV value cannot hold it), shown to
// the model cut, published as an offloaded event, and the journal's
// object is gone once the job ends.
func TestToolOutputOverMaxPayload(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB
	s := server.NewMCPServer("big", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("dump", mcp.WithDescription("Dump everything.")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(big), nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	pool, err := toolcache.NewPool(ctx, toolcache.Config{}, toolcache.WithInProcessServer("big", s, toolcache.ServerConfig{}),
		toolcache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	h := start(t, agentloop.Config{}, agentrun.Config{Pool: pool},
		llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "dump", Arguments: `{}`}}}},
		llmtest.Reply{Content: "done"})
	st := h.run(t, &jobs.Job{ID: "big-out", Task: "dump", ToolMode: "full"})
	if st.Status != jobs.StatusSucceeded || st.Result.Answer != "done" {
		t.Fatalf("state %+v", st)
	}
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1].Messages
	if out := last[len(last)-1].Content; len(out) > 64<<10 || !strings.Contains(out, "[output truncated") {
		t.Errorf("the model was shown %d bytes", len(out))
	}
	// The journal goes after the final state, before the terminal event.
	if _, err := h.client.Watch(natstest.Context(t), "big-out", func(jobs.Event) {}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(h.nc)
	obs, err := js.ObjectStore(natstest.Context(t), "AGENT_TRANSCRIPTS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.GetInfo(natstest.Context(t), jobs.JournalObjectName("big-out", "c1.0")); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the journal's object after the job: %v", err)
	}
}
