package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// dyingStore is a journal store that dies like a killed worker: once
// killed, nothing more is stored.
type dyingStore struct {
	mu   sync.Mutex
	m    map[string][]byte
	dead bool
}

func (s *dyingStore) Put(_ context.Context, key string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return errors.New("worker killed")
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = append([]byte(nil), v...)
	return nil
}

func (s *dyingStore) kill() { s.mu.Lock(); s.dead = true; s.mu.Unlock() }

// dyingEffects is an effects server and a journal store that die like a
// killed worker while write runs with an arg for which dies is true: the
// store stores nothing more and the returned context (the first
// attempt's) ends.
func dyingEffects(t *testing.T, dies func(arg string) bool) (*effects, *toolcache.View, *dyingStore, context.Context) {
	t.Helper()
	fx := &effects{}
	tools := effectsView(t, fx)
	store := &dyingStore{}
	ctx, kill := context.WithCancel(t.Context())
	t.Cleanup(kill)
	fx.onWrite = func(arg string) {
		if dies(arg) {
			store.kill()
			kill()
		}
	}
	return fx, tools, store, ctx
}

func (s *dyingStore) snapshot() map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m)
}

// effects is an MCP server whose tools count their runs: write has
// side effects, read is marked read-only. onWrite runs inside write.
type effects struct {
	mu      sync.Mutex
	runs    map[string]int // tool:arg -> runs
	keys    []string       // idempotency keys seen in _meta
	onWrite func(arg string)
}

func (e *effects) server() *server.MCPServer {
	s := server.NewMCPServer("effects", "1.0.0", server.WithToolCapabilities(true))
	schema := json.RawMessage(`{"type":"object","properties":{"arg":{"type":"string"}},"required":["arg"]}`)
	handler := func(name string) server.ToolHandlerFunc {
		return func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			arg := req.GetString("arg", "")
			e.mu.Lock()
			if e.runs == nil {
				e.runs = map[string]int{}
			}
			e.runs[name+":"+arg]++
			if m := req.Params.Meta; m != nil {
				if k, ok := m.AdditionalFields[journal.MetaKey].(string); ok {
					e.keys = append(e.keys, k)
				}
			}
			hook := e.onWrite
			e.mu.Unlock()
			if name == "write" && hook != nil {
				hook(arg)
			}
			return mcp.NewToolResultText(name + " " + arg + " done"), nil
		}
	}
	write := mcp.NewToolWithRawSchema("write", "Write something (a side effect).", schema)
	read := mcp.NewToolWithRawSchema("read", "Read something.", schema)
	read.Annotations.ReadOnlyHint = mcp.ToBoolPtr(true)
	s.AddTool(write, handler("write"))
	s.AddTool(read, handler("read"))
	return s
}

func (e *effects) count(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[key]
}

func effectsView(t *testing.T, e *effects) *toolcache.View {
	t.Helper()
	return inProcessView(t, nil, map[string]*server.MCPServer{"fx": e.server()})
}

func newJournal(t *testing.T, s journal.Store, prior map[string][]byte) *journal.Journal {
	t.Helper()
	j, err := journal.New(s, prior)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A worker killed in the middle of a round's calls: the next attempt
// takes the round's answer from the journal (the model is not asked for
// it again), completed calls are not run again, the interrupted write is
// reported to the model and not sent again, and a read-only call in
// flight is simply sent again. Every call carries its idempotency key.
func TestJournalNoCompletedCallRunsAgain(t *testing.T) {
	t.Parallel()
	// The worker resumes from the journal alone; from a checkpoint as well
	// is what an older worker's job does.
	for _, withCheckpoint := range []bool{false, true} {
		t.Run(fmt.Sprintf("checkpoint=%v", withCheckpoint), func(t *testing.T) {
			t.Parallel()
			journalNoCompletedCallRunsAgain(t, withCheckpoint)
		})
	}
}

func journalNoCompletedCallRunsAgain(t *testing.T, withCheckpoint bool) {
	// The worker dies while write(c) runs.
	fx, tools, store, ctx1 := dyingEffects(t, func(arg string) bool { return arg == "c" })
	cps := &checkpoints{}
	s1 := llmtest.NewServer(t,
		toolReply(call("write", `{"arg":"a"}`)),
		toolReply(call("write", `{"arg":"b"}`), call("read", `{"arg":"x"}`), call("write", `{"arg":"c"}`)),
	)
	in := agentloop.Input{JobID: "job-1", Task: "go", Tools: tools, Mode: agentloop.ModeFull, Checkpoints: cps}
	in.Journal = newJournal(t, store, nil)
	if _, err := newLoop(t, s1, agentloop.Config{MaxParallelCalls: 1}).Run(ctx1, in); err == nil {
		t.Fatal("the killed attempt succeeded")
	}
	if len(cps.states) != 1 {
		t.Fatalf("checkpoints %d, want round 1's", len(cps.states))
	}

	// The next attempt, from round 1's checkpoint and the journal.
	fx.onWrite = nil
	var ev events
	s2 := llmtest.NewServer(t, textReply("all done"))
	in.Sink = &ev
	if withCheckpoint {
		in.Resume = &cps.states[0]
	}
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, store.snapshot())
	res, err := newLoop(t, s2, agentloop.Config{MaxParallelCalls: 1}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "all done" || len(s2.Requests()) != 1 {
		t.Fatalf("answer %q after %d requests; want round 2 not asked again", res.Answer, len(s2.Requests()))
	}
	for _, k := range []string{"write:a", "write:b", "write:c"} {
		if n := fx.count(k); n > 1 {
			t.Errorf("%s ran %d times", k, n)
		}
	}
	if n := fx.count("write:c"); n != 1 {
		t.Errorf("write:c ran %d times, want once", n)
	}
	// b either completed before the kill (replayed) or never started (its
	// intent could not be stored, so it runs now): once either way.
	if n := fx.count("write:b"); n != 1 {
		t.Errorf("write:b ran %d times, want once", n)
	}
	if fx.count("read:x") < 1 {
		t.Error("read:x never ran")
	}
	var interrupted []string
	for _, e := range ev.of(agentloop.EventToolInterrupted) {
		interrupted = append(interrupted, e.Data["tool"].(string))
		if e.Data["idempotency_key"] == "" {
			t.Errorf("interrupted event without key: %v", e.Data)
		}
	}
	if strings.Join(interrupted, ",") != "write" {
		t.Errorf("interrupted = %v, want write(c) only", interrupted)
	}
	from := 1 // the journal alone: rounds 1 and 2 are replayed
	if withCheckpoint {
		from = 2
	}
	if r := ev.of(agentloop.EventJobResumed); len(r) != 1 || r[0].Data["from_round"] != from || r[0].Data["calls_in_flight"] == 0 {
		t.Errorf("job.resumed = %+v", r)
	}
	// The model sees the interruption as write(c)'s result.
	var sawInterrupted bool
	for _, m := range s2.Requests()[0].Messages {
		if m.Role == llm.RoleTool && strings.Contains(m.Content, "was interrupted") {
			sawInterrupted = true
		}
	}
	if !sawInterrupted {
		t.Error("the model was not told write(c) was interrupted")
	}
	fx.mu.Lock()
	defer fx.mu.Unlock()
	for _, k := range fx.keys {
		if !strings.HasPrefix(k, "job-1/") {
			t.Errorf("idempotency key %q", k)
		}
	}
	if len(fx.keys) == 0 {
		t.Error("no idempotency key reached the server")
	}
}

// A journal that cannot store the round's answer ends the attempt before
// any call runs.
func TestJournalUnavailableRunsNothing(t *testing.T) {
	t.Parallel()
	fx := &effects{}
	tools := effectsView(t, fx)
	store := &dyingStore{dead: true}
	s := llmtest.NewServer(t, toolReply(call("write", `{"arg":"a"}`)))
	in := agentloop.Input{JobID: "j", Task: "go", Tools: tools, Mode: agentloop.ModeFull, Journal: newJournal(t, store, nil)}
	_, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), in)
	if !errors.Is(err, journal.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := fx.count("write:a"); n != 0 {
		t.Fatalf("write ran %d times", n)
	}
}

// An attempt that got the final answer but died before the job's final
// state was stored: the next attempt takes the answer, and what it cost,
// from the journal instead of asking the model again.
func TestJournalFinalAnswerNotAskedAgain(t *testing.T) {
	t.Parallel()
	// The answer of a round, and the one asked for when rounds ran out.
	for _, maxRounds := range []int{0, 1} {
		t.Run(fmt.Sprintf("max_rounds=%d", maxRounds), func(t *testing.T) {
			t.Parallel()
			journalFinalAnswerNotAskedAgain(t, maxRounds)
		})
	}
}

func journalFinalAnswerNotAskedAgain(t *testing.T, maxRounds int) {
	fx := &effects{}
	tools := effectsView(t, fx)
	store := &dyingStore{}
	s1 := llmtest.NewServer(t, toolReply(call("write", `{"arg":"a"}`)), textReply("the answer"))
	in := agentloop.Input{JobID: "job-1", Task: "go", Tools: tools, Mode: agentloop.ModeFull, MaxRounds: maxRounds}
	in.Journal = newJournal(t, store, nil)
	first, err := newLoop(t, s1, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	// The worker dies here, before the final state is stored.
	s2 := llmtest.NewServer(t, textReply("another answer"))
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, store.snapshot())
	res, err := newLoop(t, s2, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "the answer" || len(s2.Requests()) != 0 {
		t.Fatalf("answer %q after %d requests; want the first attempt's, not asked again", res.Answer, len(s2.Requests()))
	}
	if res.Usage != first.Usage || res.StopReason != first.StopReason {
		t.Errorf("usage %+v stop %s; want the first attempt's %+v %s", res.Usage, res.StopReason, first.Usage, first.StopReason)
	}
	if n := fx.count("write:a"); n != 1 {
		t.Errorf("write:a ran %d times", n)
	}
}

// Meta tools and resource reads are not journaled: a resumed attempt runs
// them again, but in a round an earlier attempt completed it publishes
// their events no more than a completed call's.
func TestJournalReplayedRoundsPublishNothingAgain(t *testing.T) {
	t.Parallel()
	_, tools, store, ctx1 := dyingEffects(t, func(arg string) bool { return arg == "b" })
	s1 := llmtest.NewServer(t,
		toolReply(call("search_tools", `{"query":"write something"}`)),
		toolReply(call("call_tool", `{"name":"write","arguments":{"arg":"a"}}`)),
		toolReply(call("call_tool", `{"name":"write","arguments":{"arg":"b"}}`)),
	)
	in := agentloop.Input{JobID: "job-1", Task: "go", Tools: tools, Mode: agentloop.ModeSearch}
	in.Journal = newJournal(t, store, nil)
	if _, err := newLoop(t, s1, agentloop.Config{}).Run(ctx1, in); err == nil {
		t.Fatal("the killed attempt succeeded")
	}
	var ev events
	in.Sink = &ev
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, store.snapshot())
	if _, err := newLoop(t, llmtest.NewServer(t, textReply("done")), agentloop.Config{}).Run(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ev.of(agentloop.EventToolCall) {
		names = append(names, e.Data["name"].(string))
	}
	// Only round 3's interrupted write(b) is published again.
	if strings.Join(names, ",") != "call_tool" {
		t.Errorf("tool.call events of the resumed attempt: %v, want round 3's call_tool only", names)
	}
}
