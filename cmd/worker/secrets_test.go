package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// A job that asks an MCP server for its environment (server-everything's
// get-env) learns nothing of the worker's: no API key, NATS credential or
// JETAGENT_* setting reaches the server, and so none is in an event, the
// transcripts, the state or the worker's log (which may name settings, not
// secrets).
func TestJobsCannotReadTheWorkersSecrets(t *testing.T) {
	// Not parallel: it sets environment variables.
	everything := npmBin(t, "mcp-server-everything")
	secrets := map[string]string{
		"OPENAI_API_KEY":        "sk-e2e-model-secret",
		"NATS_PASSWORD":         "nats-e2e-secret",
		"AWS_SECRET_ACCESS_KEY": "aws-e2e-secret",
	}
	dir := t.TempDir()
	mcpCfg := filepath.Join(dir, "mcp.json")
	// The server's own secret, given by its config: the server can read
	// it, but what it answers must not show it (toolcache masks it).
	const serverSecret = "tok-e2e-server-secret-8c41f0"
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"everything": {"command": "`+everything+`", "env": {"EVERYTHING_API_TOKEN": "`+serverSecret+`"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewServer(t)
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
			return llmtest.Reply{Content: "The server's environment: " + last.Content}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "get-env", Arguments: `{}`}}}}
	})
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("NATS_USER", "worker")
	t.Setenv("OPENAI_BASE_URL", model.URL())
	t.Setenv("JETAGENT_DATA_DIR", filepath.Join(dir, "nats"))
	t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
	t.Setenv("JETAGENT_MCP_CONFIG", mcpCfg)
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *nats.Conn, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, s, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			func(_ *jobs.Worker, nc *nats.Conn) { ready <- nc })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	var nc *nats.Conn
	select {
	case nc = <-ready:
	case err := <-done:
		t.Fatalf("worker stopped: %v", err)
	}
	tctx := natstest.Context(t)
	client, err := jobs.NewClient(tctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := client.Submit(tctx, &jobs.Job{Task: "Print your environment.", Servers: []string{"everything"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := client.Wait(tctx, rc.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The call went through and printed an environment: the test reads
	// what a job can read.
	if st.Status != jobs.StatusSucceeded || !strings.Contains(st.Result.Answer, "PATH") {
		t.Fatalf("state %+v %+v", st, st.Result)
	}
	if !strings.Contains(st.Result.Answer, "EVERYTHING_API_TOKEN") {
		t.Errorf("the server was not given its own secret: %s", st.Result.Answer)
	}
	var seen []string
	seen = append(seen, "answer:"+st.Result.Answer, "log:"+logs.String())
	for _, raw := range []bool{false, true} {
		b, err := client.Transcript(tctx, rc.ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, "transcript:"+string(b))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.OrderedConsumer(tctx, "AGENT_EVENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"agent.events." + rc.ID + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(1000)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		seen = append(seen, "event:"+string(m.Data()))
	}
	kv, err := js.KeyValue(tctx, "AGENT_STATE")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(tctx, rc.ID); err == nil {
		seen = append(seen, "state:"+string(e.Value()))
	}
	for _, text := range seen {
		where, _, _ := strings.Cut(text, ":")
		for k, v := range secrets {
			if strings.Contains(text, v) {
				t.Errorf("%s holds %s", where, k)
			}
		}
		if strings.Contains(text, serverSecret) {
			t.Errorf("%s holds the server's EVERYTHING_API_TOKEN: %s", where, excerpt(text, serverSecret))
		}
		if where != "log" && strings.Contains(text, "JETAGENT_") {
			t.Errorf("%s names a JETAGENT_ setting: %s", where, excerpt(text, "JETAGENT_"))
		}
	}
	var tr jobs.Transcript
	b, _ := client.Transcript(tctx, rc.ID, false)
	if err := json.Unmarshal(b, &tr); err != nil || len(tr.Messages) < 3 {
		t.Errorf("transcript %v: %s", err, b)
	}
}

// excerpt is the text around the first sub in s.
func excerpt(s, sub string) string {
	i := strings.Index(s, sub)
	return s[max(0, i-40):min(len(s), i+80)]
}
