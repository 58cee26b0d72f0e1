package agentloop_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// oddProgressServer's tool odd sends the reports reports, each with the
// call's token, waiting for each to be taken from ack, then answers.
func oddProgressServer(ack <-chan struct{}, reports []map[string]any) *server.MCPServer {
	s := server.NewMCPServer("odd", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewToolWithRawSchema("odd", "Report oddly.", json.RawMessage(`{"type":"object"}`)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for _, r := range reports {
				if err := sendProgress(ctx, req.Params.Meta.ProgressToken, r, ack, true); err != nil {
					return nil, err
				}
			}
			return mcp.NewToolResultText("done"), nil
		})
	return s
}

// A server's progress reports are the server's to word: a message of
// megabytes was published whole in each of up to 100 events (every one
// too large for NATS, so stored as an object, on the session's reading
// goroutine), and a number JSON cannot hold (NaN, an infinity: a Go
// server in process) made an event that could not be encoded, lost.
// Each event is now valid JSON of bounded size.
func TestToolProgressBounded(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("é", 1<<20)
	reports := []map[string]any{
		{"progress": 1, "total": 2, "message": huge},
		{"progress": math.NaN(), "total": 2},
		{"progress": 2, "total": math.Inf(1), "message": "inf"},
		{"progress": -1, "total": 0.5, "message": "odd but said"},
	}
	ack := make(chan struct{})
	tools := inProcessView(t, nil, map[string]*server.MCPServer{"odd": oddProgressServer(ack, reports)})
	s := llmtest.NewServer(t, toolReply(call("odd", `{}`)), textReply("done"))
	var mu sync.Mutex
	var progress []map[string]any
	sink := agentloop.SinkFunc(func(_ context.Context, e agentloop.Event) {
		if e.Type != agentloop.EventToolProgress {
			return
		}
		b, err := json.Marshal(e.Data)
		if err != nil || len(b) > 4<<10 {
			t.Errorf("tool.progress event of %d bytes (%v): %.200s", len(b), err, b)
		}
		mu.Lock()
		progress = append(progress, e.Data)
		mu.Unlock()
		ack <- struct{}{}
	})
	if _, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "odd", Tools: tools, Mode: agentloop.ModeFull, Sink: sink}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) != len(reports) {
		t.Fatalf("%d tool.progress events, want %d", len(progress), len(reports))
	}
	// The message's start is kept; a number JSON cannot hold is left out
	// (a total as unknown), what else the report said is kept.
	if m, _ := progress[0]["message"].(string); !strings.HasPrefix(m, "éé") {
		t.Errorf("the long message became %.40q", m)
	}
	if _, has := progress[1]["progress"]; has || progress[1]["total"] != float64(2) {
		t.Errorf("NaN's report: %v", progress[1])
	}
	if _, has := progress[2]["total"]; has || progress[2]["progress"] != float64(2) || progress[2]["message"] != "inf" {
		t.Errorf("an infinite total's report: %v", progress[2])
	}
	if progress[3]["progress"] != float64(-1) || progress[3]["total"] != 0.5 || progress[3]["message"] != "odd but said" {
		t.Errorf("a report of odd numbers: %v", progress[3])
	}
}
