package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/schemas"
)

// workerChildEnv, when set, makes the test binary run as the worker
// command itself, configured by the environment (see crash_test.go).
const workerChildEnv = "JETAGENT_WORKER_TEST_CHILD"

func TestMain(m *testing.M) {
	if codemode.IsChild() { // a code-mode child of a worker run in process
		os.Exit(codemode.ServeChild(os.Stdin, os.Stdout))
	}
	if os.Getenv(workerChildEnv) != "" {
		os.Exit(run(nil, os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "jetagent-worker-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testBinDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(natstest.GoleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testBinDir holds the binaries the tests build (removed after the run).
var testBinDir string

// binaries builds each package the tests run as a real binary once per
// test run, into testBinDir.
var binaries = struct {
	mu    sync.Mutex
	built map[string]func() (string, error)
}{built: map[string]func() (string, error){}}

func buildBinary(pkg, name string) (string, error) {
	binaries.mu.Lock()
	build, ok := binaries.built[pkg]
	if !ok {
		build = sync.OnceValues(func() (string, error) {
			bin := filepath.Join(testBinDir, name)
			out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
			}
			return bin, nil
		})
		binaries.built[pkg] = build
	}
	binaries.mu.Unlock()
	return build()
}

const waitTimeout = 30 * time.Second

func TestHelpListsEveryVariable(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := out.String()
	for _, want := range []string{
		"NATS_URL", "NATS_CREDS", "OPENAI_API_KEY", "https://api.openai.com/v1",
		"OPENAI_MODEL", "JETAGENT_CONCURRENCY", "JETAGENT_ACK_WAIT", "JETAGENT_MCP_CONFIG",
		"JETAGENT_METRICS_ADDR", "JETAGENT_SHUTDOWN_GRACE", "JETAGENT_LISTEN",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	// Every variable of every settings struct has a line with a meaning.
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "JETAGENT_") || strings.HasPrefix(line, "NATS_") || strings.HasPrefix(line, "OPENAI_") {
			if f := strings.Fields(line); len(f) < 3 {
				t.Errorf("line without default or meaning: %q", line)
			}
		}
	}
}

// TestQueuesTakeSpaces: "a, b" was refused (`" b" must match ...`) where
// NATS_URL and JETAGENT_CONTENT_CALLS take a space after a comma.
func TestQueuesTakeSpaces(t *testing.T) {
	// Not parallel: it sets environment variables.
	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"a,b", []string{"a", "b"}},
		{"a, b", []string{"a", "b"}},
		{" fast ,slow", []string{"fast", "slow"}},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test")
			t.Setenv("JETAGENT_DATA_DIR", t.TempDir())
			t.Setenv("JETAGENT_QUEUES", tc.env)
			s, err := loadSettings()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Queues, tc.want) {
				t.Errorf("queues %q, want %q", s.Queues, tc.want)
			}
		})
	}
}

func TestInvalidConfigNamesTheVariable(t *testing.T) {
	// Not parallel: it sets environment variables.
	files := t.TempDir()
	notJSON := filepath.Join(files, "not.json")
	if err := os.WriteFile(notJSON, []byte("{mcpServers: nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A trailing comma on line 3: encoding/json names only a byte offset.
	comma := filepath.Join(files, "comma.json")
	if err := os.WriteFile(comma, []byte("{\"mcpServers\": {\n  \"a\": {\"command\": \"x\"},\n  \"b\": {\"command\": \"y\"},\n}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	misspelt := filepath.Join(files, "misspelt.json")
	if err := os.WriteFile(misspelt, []byte(`{"mcpServers": {"x": {"command": "a", "sessionMod": "per-job"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"JETAGENT_CONCURRENCY": "many"}, `invalid JETAGENT_CONCURRENCY="many": want an integer (`},
		// The value's kind in an operator's words, not Go's ([]time.Duration).
		{map[string]string{"JETAGENT_BACKOFF": "30s, 1m"},
			`invalid JETAGENT_BACKOFF="30s, 1m": want durations separated by commas, such as 30s,1m,5m (time: invalid duration " 1m")`},
		{map[string]string{"JETAGENT_SHUTDOWN_GRACE": "5"}, `invalid JETAGENT_SHUTDOWN_GRACE="5": want a duration such as 30s, 5m or 1h (`},
		{map[string]string{"JETAGENT_PPROF": "yes"}, `invalid JETAGENT_PPROF="yes": want true or false (`},
		{map[string]string{"JETAGENT_EMBEDDING_WEIGHT": "high"}, `invalid JETAGENT_EMBEDDING_WEIGHT="high": want a number (`},
		{map[string]string{"JETAGENT_CONCURRENCY": "0"}, "invalid JETAGENT_CONCURRENCY: must be 1..10000 (got 0)"},
		{map[string]string{"JETAGENT_CONCURRENCY": "99999999999"}, "invalid JETAGENT_CONCURRENCY: must be 1..10000 (got 99999999999)"},
		{map[string]string{"JETAGENT_ACK_WAIT": "1000000h"}, "invalid JETAGENT_ACK_WAIT: must be at most 24h0m0s: it is how long a crashed worker's job waits to run again (got 1000000h0m0s)"},
		{map[string]string{"JETAGENT_ACK_WAIT": "5"}, `invalid JETAGENT_ACK_WAIT="5"`},
		{map[string]string{"JETAGENT_HEARTBEAT": "1m"}, "invalid JETAGENT_HEARTBEAT"},
		// The first backoff step is the shortest ack wait: refused before
		// NATS starts, naming both variables.
		{map[string]string{"JETAGENT_HEARTBEAT": "20s", "JETAGENT_ACK_WAIT": "30s", "JETAGENT_BACKOFF": "10s,1m"},
			"invalid JETAGENT_HEARTBEAT: 20s must be positive and at most half the shortest backoff step 10s (with JETAGENT_BACKOFF=10s,1m)"},
		{map[string]string{"JETAGENT_RETRY_DELAY": "1m", "JETAGENT_RETRY_DELAY_MAX": "30s"}, "invalid JETAGENT_RETRY_DELAY_MAX: 30s must not be below"},
		{map[string]string{"JETAGENT_MAX_ROUNDS": "60"}, "invalid JETAGENT_MAX_ROUNDS: 60 exceeds JETAGENT_MAX_ROUNDS_CAP 50 (with JETAGENT_MAX_ROUNDS_CAP (default))"},
		{map[string]string{"JETAGENT_CLIENT_TOOL_TIMEOUT": "0s"}, "invalid JETAGENT_CLIENT_TOOL_TIMEOUT: must be positive"},
		{map[string]string{"JETAGENT_MCP_CONFIG": "/nonexistent/mcp.json"}, "JETAGENT_MCP_CONFIG: toolcache: read config: open /nonexistent/mcp.json"},
		{map[string]string{"OPENAI_BASE_URL": "http://x/v1?a=b"}, "invalid OPENAI_BASE_URL: \"http://x/v1?a=b\" must not have a query"},
		{map[string]string{"JETAGENT_QUEUES": "a.b"}, `invalid JETAGENT_QUEUES: "a.b"`},
		{map[string]string{"JETAGENT_TOOL_MODE": "magic"}, "invalid JETAGENT_TOOL_MODE"},
		// Every mode is named, code too (it was left out of the message).
		{map[string]string{"JETAGENT_TOOL_MODE": "bogus"}, `invalid JETAGENT_TOOL_MODE: "bogus" is not auto, full, deferred, search or code`},
		{map[string]string{"JETAGENT_CONCURRENCY": "-3"}, "invalid JETAGENT_CONCURRENCY: must be 1..10000 (got -3)"},
		{map[string]string{"JETAGENT_ACK_WAIT": "-5s"}, "invalid JETAGENT_ACK_WAIT: must be at least 1s (got -5s)"},
		{map[string]string{"JETAGENT_JOB_TIMEOUT": "-1m"}, "invalid JETAGENT_JOB_TIMEOUT: must be positive (got -1m0s)"},
		{map[string]string{"JETAGENT_SHUTDOWN_GRACE": "-1s"}, "invalid JETAGENT_SHUTDOWN_GRACE: must be positive (got -1s)"},
		{map[string]string{"JETAGENT_DUPLICATE_WINDOW": "-1h"}, "invalid JETAGENT_DUPLICATE_WINDOW: must be at least 100ms (got -1h0m0s)"},
		{map[string]string{"JETAGENT_MAX_DELIVER": "0"}, "invalid JETAGENT_MAX_DELIVER: must be at least 1 (got 0)"},
		{map[string]string{"JETAGENT_MCP_CONFIG": notJSON}, "JETAGENT_MCP_CONFIG: " + notJSON + ": toolcache: config is not valid JSON"},
		{map[string]string{"JETAGENT_MCP_CONFIG": comma}, "invalid character '}' looking for beginning of object key string (at line 4, column 1)"},
		{map[string]string{"JETAGENT_MCP_CONFIG": files}, "JETAGENT_MCP_CONFIG: toolcache: read config: read " + files + ": is a directory"},
		{map[string]string{"JETAGENT_MCP_CONFIG": misspelt}, "JETAGENT_MCP_CONFIG: " + misspelt + `: toolcache: server "x": unknown key "sessionMod": did you mean "sessionMode"?`},
		{map[string]string{"JETAGENT_CODE_ABOVE": "100"}, "invalid JETAGENT_CODE_ABOVE: 100 must be 0 (off) or at least JETAGENT_SEARCH_ABOVE"},
		{map[string]string{"JETAGENT_SEARCH_ABOVE": "100"}, "invalid JETAGENT_SEARCH_ABOVE: 100 is below JETAGENT_DEFERRED_ABOVE 3000 (with JETAGENT_DEFERRED_ABOVE (default))"},
		{map[string]string{"JETAGENT_LISTEN": "4222"}, "invalid JETAGENT_LISTEN"},
		// The metrics listener took the port first, and the embedded
		// server's failure blamed another worker's NATS.
		{map[string]string{"JETAGENT_LISTEN": "127.0.0.1:14999", "JETAGENT_METRICS_ADDR": ":14999"},
			"invalid JETAGENT_METRICS_ADDR: :14999 is the embedded NATS server's port (JETAGENT_LISTEN=127.0.0.1:14999)"},
		{map[string]string{"NATS_URL": "nats://x:4222", "NATS_PASSWORD": "p"}, "NATS_PASSWORD is set but NATS_USER is not"},
		{map[string]string{"OPENAI_BASE_URL": "localhost:8080"}, "invalid OPENAI_BASE_URL"},
		{map[string]string{"OPENAI_API_KEY": ""}, "invalid OPENAI_API_KEY: is required"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test")
			dataDir := filepath.Join(t.TempDir(), "nats")
			t.Setenv("JETAGENT_DATA_DIR", dataDir)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			if code := run(nil, io.Discard, &stderr); code != 1 {
				t.Fatalf("exit %d", code)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("got %q, want %q", stderr.String(), tt.want)
			}
			if n := strings.Count(stderr.String(), "\n"); n != 1 {
				t.Errorf("%d lines, want one: %q", n, stderr.String())
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the embedded NATS started (%s exists: %v)", dataDir, err)
			}
		})
	}
}

// buildMCPServer builds the bundled example MCP server once per test run.
func buildMCPServer() (string, error) { return buildBinary("../../examples/mcpserver", "mcpserver") }

// needMCPServer builds the example MCP server before a test's ctx starts,
// for tests that build it later (crashWorkerEnv): the first to need it
// spends the build (seconds, more under load) out of its ctx otherwise.
func needMCPServer(t *testing.T) {
	t.Helper()
	if _, err := buildMCPServer(); err != nil {
		t.Fatal(err)
	}
}

// scriptedModel answers by task: "add A B" calls the add tool then reports
// its result; "sleep" calls slow for a minute; "think" never answers.
func scriptedModel(req llmtest.RecordedRequest) llmtest.Reply {
	var task, toolResult string
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			task = m.Content
		case llm.RoleTool:
			toolResult = m.Content
		}
	}
	switch {
	case toolResult != "":
		return llmtest.Reply{Content: "The result is " + toolResult}
	case strings.HasPrefix(task, "add "):
		var a, b int
		_, _ = fmt.Sscanf(task, "add %d %d", &a, &b) // a task that is not "add" adds zeros
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{
			Name: "add", Arguments: fmt.Sprintf(`{"a":%d,"b":%d}`, a, b)}}}}
	case task == "sleep":
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "slow", Arguments: `{"ms":60000}`}}}}
	case task == "think":
		return llmtest.Reply{Block: make(chan struct{})}
	}
	return llmtest.Reply{Content: "I do not know how to " + task}
}

type harness struct {
	nc     *nats.Conn
	client *jobs.Client
	model  *llmtest.Server
	worker *jobs.Worker
}

// startWorker runs the worker command's serve with an embedded NATS on a
// random port, the example MCP server over stdio and the scripted model.
func startWorker(t *testing.T) *harness {
	t.Helper()
	bin, err := buildMCPServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mcpCfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"demo": {"command": "`+bin+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewServer(t)
	model.Handle(scriptedModel)

	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", model.URL())
	t.Setenv("JETAGENT_DATA_DIR", filepath.Join(dir, "nats"))
	t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
	t.Setenv("JETAGENT_MCP_CONFIG", mcpCfg)
	t.Setenv("JETAGENT_WORKER_ID", "e2e")
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{model: model}
	h.worker, h.nc = startServe(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.client, err = jobs.NewClient(ctx, h.nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// startServe runs the worker's serve with settings s until the test ends,
// and returns the worker and its NATS connection once it takes jobs.
func startServe(t *testing.T, s Settings) (*jobs.Worker, *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type up struct {
		w  *jobs.Worker
		nc *nats.Conn
	}
	ready := make(chan up, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, s, slog.New(slog.NewTextHandler(io.Discard, nil)), func(w *jobs.Worker, nc *nats.Conn) {
			ready <- up{w, nc}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	select {
	case u := <-ready:
		return u.w, u.nc
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("worker stopped: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("worker not ready")
	}
	return nil, nil
}

// TestEndToEnd runs real jobs through the worker command: embedded NATS,
// the example MCP server over stdio, the agent loop and a scripted model.
func TestEndToEnd(t *testing.T) {
	h := startWorker(t)
	v, err := jobs.NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("tool call", func(t *testing.T) {
		ctx := natstest.Context(t)
		rc, err := h.client.Submit(ctx, &jobs.Job{Task: "add 2 3", Servers: []string{"demo"}})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		st, err := h.client.Watch(ctx, rc.ID, func(ev jobs.Event) { types = append(types, ev.Type) })
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusSucceeded || st.Result.Answer != "The result is 5" || st.Result.Rounds != 1 {
			t.Fatalf("state %+v result %+v", st, st.Result)
		}
		joined := strings.Join(types, ",")
		for _, want := range []string{"started", "llm.request", "llm.response", "tool.call", "tool.result", "loop.outcome", "succeeded"} {
			if !strings.Contains(joined, want) {
				t.Errorf("events %s lack %s", joined, want)
			}
		}
		// What the model was offered: the example server's tools.
		reqs := h.model.Requests()
		if len(reqs) < 2 || !strings.Contains(string(reqs[0].ToolsJSON), `"add"`) {
			t.Fatalf("model requests %d, tools %s", len(reqs), reqs[0].ToolsJSON)
		}
		// Payloads match the schemas.
		for _, raw := range []bool{false, true} {
			b, err := h.client.Transcript(ctx, rc.ID, raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Validate(schemas.Transcript, b); err != nil {
				t.Errorf("transcript raw=%v: %v", raw, err)
			}
			var tr jobs.Transcript
			_ = json.Unmarshal(b, &tr)
			var sawCall, sawResult bool
			for _, m := range tr.Messages {
				sawCall = sawCall || (len(m.ToolCalls) == 1 && m.ToolCalls[0].Function.Name == "add")
				sawResult = sawResult || (m.Role == llm.RoleTool && m.Content == "5")
			}
			if !sawCall || !sawResult || tr.Mode != "full" || tr.Usage.ToolDefTokens == 0 {
				t.Errorf("transcript raw=%v: %+v", raw, tr)
			}
		}
		js, _ := jetstream.New(h.nc)
		events, _ := js.Stream(ctx, "AGENT_EVENTS")
		cons, err := events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"agent.events." + rc.ID + ".>"}})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if err := v.Validate(schemas.Event, m.Data()); err != nil {
				t.Errorf("event %s: %v", m.Subject(), err)
			}
		}
		if n != len(types) {
			t.Errorf("validated %d events, watched %d", n, len(types))
		}
		kv, _ := js.KeyValue(ctx, "AGENT_STATE")
		e, err := kv.Get(ctx, rc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Validate(schemas.State, e.Value()); err != nil {
			t.Errorf("state: %v", err)
		}
	})

	// A cancel reaches the running tool call and the model request: both see
	// a cancelled context, and the job ends cancelled. The bound is ctx
	// (natstest.WaitTimeout, 30 s), not a second as it was: a loaded machine
	// takes longer than that to settle a job, and a cancel that did not
	// reach them still fails it, as the slow call takes a minute and the
	// model request never ends.
	for _, tc := range []struct{ task, waitFor string }{{"sleep", "tool.call"}, {"think", "llm.request"}} {
		t.Run("cancel during "+tc.waitFor, func(t *testing.T) {
			ctx := natstest.Context(t)
			id := "cancel-" + tc.task
			sub, err := h.nc.SubscribeSync("agent.events." + id + "." + tc.waitFor)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe() //nolint:errcheck
			if _, err := h.client.Submit(ctx, &jobs.Job{ID: id, Task: tc.task, Servers: []string{"demo"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.NextMsgWithContext(ctx); err != nil {
				t.Fatal(err)
			}
			st, err := h.client.Cancel(ctx, id)
			if err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if st.Status != jobs.StatusCancelled {
				t.Fatalf("state %+v", st)
			}
		})
	}

	t.Run("unknown server", func(t *testing.T) {
		ctx := natstest.Context(t)
		rc, err := h.client.Submit(ctx, &jobs.Job{Task: "add 1 1", Servers: []string{"demo", "nope"}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.client.Wait(ctx, rc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusDead || st.Error != `job names an MCP server this worker does not configure: "nope" (configured: demo)` {
			t.Fatalf("state %+v", st)
		}
	})

	t.Run("misspelt server", func(t *testing.T) {
		ctx := natstest.Context(t)
		rc, err := h.client.Submit(ctx, &jobs.Job{Task: "add 1 1", Servers: []string{"dmeo"}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.client.Wait(ctx, rc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusDead || st.Error != `job names an MCP server this worker does not configure: "dmeo" (did you mean "demo"? configured: demo)` {
			t.Fatalf("state %+v", st)
		}
	})
}

// worker tokens reads its configuration as the worker does: the auto-mode
// thresholds of the environment decide its auto column, and a bad value is
// refused naming the variable.
func TestTokensHonoursThresholds(t *testing.T) {
	// Not parallel: it sets environment variables.
	catalog := "../../../shared/catalogs/notion.json"
	if _, err := os.Stat(catalog); err != nil {
		t.Skipf("shared catalogs not here: %v", err)
	}
	tests := []struct {
		env      map[string]string
		code     int
		want     string
		wantErrs string
	}{
		{nil, 0, "deferred\n", ""},
		{map[string]string{"JETAGENT_DEFERRED_ABOVE": "1", "JETAGENT_SEARCH_ABOVE": "2"}, 0, "search\n", ""},
		{map[string]string{"JETAGENT_DEFERRED_ABOVE": "100000", "JETAGENT_SEARCH_ABOVE": "200000"}, 0, "full\n", ""},
		{map[string]string{"JETAGENT_SEARCH_ABOVE": "10"}, 1, "", "invalid JETAGENT_SEARCH_ABOVE"},
		{map[string]string{"JETAGENT_MCP_HEALTH_MISSES": "0"}, 1, "", "invalid JETAGENT_MCP_HEALTH_MISSES: must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.env), func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := run([]string{"tokens", catalog}, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if !strings.HasSuffix(stdout.String(), tt.want) || !strings.Contains(stderr.String(), tt.wantErrs) {
				t.Errorf("stdout %q stderr %q, want %q / %q", stdout.String(), stderr.String(), tt.want, tt.wantErrs)
			}
		})
	}
}

// TestUnknownFlagsOneLine: an unknown command or flag is refused with one
// line naming it (and what a typo stands for) and the usage, not the flag
// package's usage dump besides.
func TestUnknownFlagsOneLine(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--bogus"}, 2, `worker: unknown command "--bogus" (see worker --help)`},
		{[]string{"serve"}, 2, `worker: unknown command "serve" (see worker --help)`},
		{[]string{"tools", "--bogus"}, 2, "worker: tools: flag provided but not defined: -bogus (usage: worker tools [-markdown])"},
		{[]string{"tokens", "-x", "a.json"}, 2, "worker: tokens: flag provided but not defined: -x (usage: worker tokens [-markdown] CATALOG.json...)"},
		{[]string{"search-eval", "--nope"}, 2, "worker: search-eval: flag provided but not defined: -nope (usage: worker search-eval"},
		// A typo is named with what it stands for.
		{[]string{"serach-eval"}, 2, `worker: unknown command "serach-eval"; did you mean worker search-eval? (see worker --help)`},
		{[]string{"Tokens"}, 2, `worker: unknown command "Tokens"; did you mean worker tokens?`},
		{[]string{"tokens", "--markdwn", "a.json"}, 2, "worker: tokens: flag provided but not defined: -markdwn (did you mean --markdown?) (usage:"},
		{[]string{"search-eval", "--mises"}, 2, "worker: search-eval: flag provided but not defined: -mises (did you mean --misses?) (usage:"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if got := stderr.String(); !strings.HasPrefix(got, tt.want) || strings.Count(got, "\n") != 1 || stdout.Len() != 0 {
				t.Errorf("stderr %q (stdout %q), want one line starting %q", got, stdout.String(), tt.want)
			}
		})
	}
}

// TestSubcommandHelp: -h, --help and "help CMD" print a subcommand's usage
// and flags on stdout and exit 0, instead of "flag: help requested" and
// exit 1.
func TestSubcommandHelp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"search-eval", "--help"}, []string{"usage: worker search-eval", "QUERIES.jsonl:", "-embed-weight", "-misses"}},
		{[]string{"search-eval", "a.jsonl", "-h"}, []string{"usage: worker search-eval"}},
		{[]string{"help", "search-eval"}, []string{"usage: worker search-eval", "-half"}},
		{[]string{"tokens", "-h"}, []string{"usage: worker tokens", "-markdown"}},
		{[]string{"help", "tools"}, []string{"usage: worker tools", "JETAGENT_MCP_CONFIG", "-markdown"}},
		{[]string{"help", "nonsense"}, []string{"worker runs jetagent jobs"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != 0 || stderr.Len() != 0 {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("help lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// TestTokensNamesUnnamedCatalogs: a bare tools array has no server name;
// its row is named by its file, as search-eval names its server.
func TestTokensNamesUnnamedCatalogs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bare-tools.json")
	if err := os.WriteFile(path, []byte(`[{"name":"ping","description":"Ping.","inputSchema":{"type":"object"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"tokens", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "bare-tools ") {
		t.Errorf("no row named by the file:\n%s", stdout.String())
	}
}

// TestToolsShowsLeftOutDefinitions: worker tools prints the pool's
// warnings on stderr, so a tool definition the pool leaves out is named
// with the reason; they were discarded, and the tool was simply missing.
func TestToolsShowsLeftOutDefinitions(t *testing.T) {
	// Not parallel: it sets JETAGENT_MCP_CONFIG.
	srv := mcpserver.NewMCPServer("catalog", "1.0.0", mcpserver.WithToolCapabilities(false))
	ok := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	srv.AddTool(mcp.NewTool("good_tool", mcp.WithDescription("A good tool.")), ok)
	srv.AddTool(mcp.NewToolWithRawSchema("bad_tool", "Its schema is no object.", json.RawMessage(`"string"`)), ok)
	hs := httptest.NewServer(mcpserver.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(cfg, []byte(`{"mcpServers":{"catalog":{"url":"`+hs.URL+`/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JETAGENT_MCP_CONFIG", cfg)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"tools"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "good_tool") || strings.Contains(stdout.String(), "bad_tool") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
	if e := stderr.String(); !strings.Contains(e, "MCP tool definitions left out") || !strings.Contains(e, "bad_tool") {
		t.Errorf("stderr does not name the left-out tool:\n%s", e)
	}
}

// TestSubcommandsUsageExit2: every subcommand exits 2 for a command line
// it cannot run and 1 for what its files hold (search-eval did; tokens and
// tools exited 1 for both).
func TestSubcommandsUsageExit2(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"tokens"}, 2},
		{[]string{"tokens", "--bogus", bad}, 2},
		{[]string{"tools", "--markdown=maybe"}, 2},
		{[]string{"tokens", bad}, 1},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
		})
	}
}
