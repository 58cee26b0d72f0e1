package agentrun_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// harness is a worker running agentrun's Runner on an embedded NATS with
// the scripted model, and a client to submit to it.
type harness struct {
	model  *llmtest.Server
	client *jobs.Client
	nc     *nats.Conn
}

func start(t *testing.T, loopCfg agentloop.Config, runCfg agentrun.Config, replies ...llmtest.Reply) *harness {
	t.Helper()
	model := llmtest.NewServer(t, replies...)
	c, err := llm.New(llm.Config{BaseURL: model.URL(), Model: "scripted", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	loopCfg.LLM = c
	loop, err := agentloop.New(loopCfg)
	if err != nil {
		t.Fatal(err)
	}
	runCfg.Loop = loop
	runner, err := agentrun.New(runCfg)
	if err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	jc := jobs.Config{
		Conn: nc, Runner: runner, Admit: agentrun.Admit,
		FetchWait: 200 * time.Millisecond, RetryDelay: 10 * time.Millisecond, RetryDelayMax: 10 * time.Millisecond,
	}
	if runCfg.Pool != nil { // as the worker does
		jc.ServerNames = runCfg.Pool.Servers()
		jc.KnownServer = func(name string) bool { return slices.Contains(jc.ServerNames, name) }
	}
	jobstest.RunWorker(t, jc)
	client, err := jobs.NewClient(natstest.Context(t), nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{model: model, client: client, nc: nc}
}

func (h *harness) run(t *testing.T, job *jobs.Job) *jobs.State {
	t.Helper()
	ctx := natstest.Context(t)
	rc, err := h.client.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.client.Wait(ctx, rc.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRunSucceedsWithTheDefaults(t *testing.T) {
	t.Parallel()
	h := start(t, agentloop.Config{DefaultSystem: "You are the default."}, agentrun.Config{Model: "the-default-model"},
		llmtest.Reply{Content: "four"})
	st := h.run(t, &jobs.Job{ID: "j1", Task: "What is 2+2?"})
	if st.Status != jobs.StatusSucceeded || st.Result == nil || st.Result.Answer != "four" {
		t.Fatalf("state %+v", st)
	}
	reqs := h.model.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) != 2 || reqs[0].Messages[0].Content != "You are the default." {
		t.Fatalf("model was shown %+v", reqs)
	}
	b, err := h.client.Transcript(natstest.Context(t), "j1", false)
	if err != nil {
		t.Fatal(err)
	}
	var tr jobs.Transcript
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	// The runner reflects, and the transcript says so; the job named no
	// model, so it carries the configured one.
	if !tr.Reflected || tr.Model != "the-default-model" || tr.Mode != "full" || tr.StopReason != agentloop.StopFinalAnswer {
		t.Errorf("transcript %+v", tr)
	}
}

func TestAdmitRefusesBadClientTools(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name  string
		tools []clienttools.Decl
		ok    bool
	}{
		{"none", nil, true},
		{"valid", []clienttools.Decl{{Name: "ask", InputSchema: schema}}, true},
		{"bad name", []clienttools.Decl{{Name: "a b", InputSchema: schema}}, false},
		{"twice", []clienttools.Decl{{Name: "a", InputSchema: schema}, {Name: "a", InputSchema: schema}}, false},
		{"schema does not compile", []clienttools.Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"nope"}`)}}, false},
		// The worker's own tools cannot be replaced by a client's.
		{"resource bridge name", []clienttools.Decl{{Name: "mcp_read_resource", InputSchema: schema}}, false},
		{"meta tool name", []clienttools.Decl{{Name: "call_tool", InputSchema: schema}}, false},
		{"code mode name", []clienttools.Decl{{Name: "execute_code", InputSchema: schema}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := agentrun.Admit(&jobs.Job{Task: "x", ClientTools: tt.tools})
			if (err == nil) != tt.ok {
				t.Errorf("Admit = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, clienttools.ErrInvalidDecl) {
				t.Errorf("Admit = %v, want ErrInvalidDecl", err)
			}
		})
	}
}

func TestProviderErrorsAreRetriedOrFail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		reply  llmtest.Reply
		status jobs.Status
	}{
		// A request the provider refuses outright fails the job at once.
		{"bad request", llmtest.Reply{Status: 400, Content: "no such model"}, jobs.StatusFailed},
		// An overloaded provider hands the job back until MaxDeliver, then
		// it is dead-lettered (the worker's RetryDelay applies between).
		{"overloaded", llmtest.Reply{Status: 503, Content: "overloaded"}, jobs.StatusDead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, agentloop.Config{}, agentrun.Config{})
			h.model.Handle(func(llmtest.RecordedRequest) llmtest.Reply { return tt.reply })
			st := h.run(t, &jobs.Job{Task: "x"})
			if st.Status != tt.status {
				t.Errorf("status %s (%s), want %s", st.Status, st.Error, tt.status)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := agentrun.New(agentrun.Config{}); !errors.Is(err, agentrun.ErrConfig) {
		t.Errorf("no loop: %v", err)
	}
	if err := (agentrun.Config{ClientToolTimeout: -time.Second}).Validate(); !errors.Is(err, agentrun.ErrConfig) {
		t.Errorf("negative timeout: %v", err)
	}
}

// A job's allow and deny globs apply to its client tools as to server
// tools: a denied client tool is not offered to the model.
func TestDenyAppliesToClientTools(t *testing.T) {
	t.Parallel()
	h := start(t, agentloop.Config{}, agentrun.Config{}, llmtest.Reply{Content: "done"})
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	st := h.run(t, &jobs.Job{
		Task: "x", ToolMode: "full", Deny: []string{"write_*"},
		ClientTools: []clienttools.Decl{
			{Name: "read_file", InputSchema: schema}, {Name: "write_file", InputSchema: schema},
		},
		ClientSecret: "0123456789abcdef0123456789abcdef",
	})
	if st.Status != jobs.StatusSucceeded {
		t.Fatalf("state %+v", st)
	}
	reqs := h.model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	var names []string
	for _, tool := range reqs[0].Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "read_file") || slices.Contains(names, "write_file") {
		t.Errorf("model was offered %v; want read_file and not write_file", names)
	}
}
