package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// scrape reads the worker's /metrics.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value is the counter, gauge or histogram count of the series of name
// with all of labels (k=v pairs); -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	total, found := 0.0, false
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	if !found {
		return -1
	}
	return total
}

// get returns the status and body of GET base+path.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond (an HTTP check) until it holds or the time is up.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(waitTimeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestMetricsAndHealth runs jobs through the worker command and reads
// /metrics, /healthz and /readyz: job counters and histograms, model and
// tool figures by model, server and tool, dead letters by reason class,
// MCP sessions; /readyz turns unready when the MCP server dies and ready
// again when it is back.
func TestMetricsAndHealth(t *testing.T) {
	bin, err := buildMCPServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker, pidFile := filepath.Join(dir, "mcp-allowed"), filepath.Join(dir, "mcp.pid")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The server starts only while the marker exists, so once killed
	// without it, it stays down.
	script := filepath.Join(dir, "mcp.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\n[ -f %q ] || exit 1\necho $$ > %q\nexec %q\n", marker, pidFile, bin)), 0o700); err != nil {
		t.Fatal(err)
	}
	mcpCfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"demo": {"command": "`+script+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mdl := llmtest.NewServer(t)
	mdl.Handle(scriptedModel)
	for k, v := range map[string]string{
		"OPENAI_API_KEY": "", "OPENAI_BASE_URL": mdl.URL(), "OPENAI_MODEL": "scripted-1",
		"JETAGENT_DATA_DIR": filepath.Join(dir, "nats"), "JETAGENT_LISTEN": "127.0.0.1:0",
		"JETAGENT_MCP_CONFIG": mcpCfg, "JETAGENT_WORKER_ID": "metrics", "JETAGENT_METRICS_ADDR": "127.0.0.1:0",
		"JETAGENT_MCP_BACKOFF_INITIAL": "20ms", "JETAGENT_MCP_BACKOFF_MAX": "100ms",
	} {
		t.Setenv(k, v)
	}
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	s.onMetrics = func(a string) { addrs <- a }
	_, nc := startServe(t, s)
	base := "http://" + <-addrs
	ctx := natstest.Context(t)
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}

	if code, body := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz %d %s", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz %d %s", code, body)
	}

	// One job with a tool call, one dead-lettered at the door for each of
	// two reasons.
	rc, err := client.Submit(ctx, &jobs.Job{Task: "add 2 3", Servers: []string{"demo"}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := client.Wait(ctx, rc.ID); err != nil || st.Status != jobs.StatusSucceeded {
		t.Fatalf("%+v %v", st, err)
	}
	bad, err := client.Submit(ctx, &jobs.Job{Task: "add 1 1", Servers: []string{"nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Wait(ctx, bad.ID); err != nil {
		t.Fatal(err)
	}
	dlq, err := nc.SubscribeSync("agent.dlq.default")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("agent.jobs.default", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := dlq.NextMsgWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	_ = dlq.Unsubscribe()

	// A dead letter is counted after its copy is published and its state
	// written (which is what Wait sees): wait for both counters.
	var fams map[string]*dto.MetricFamily
	waitFor(t, "both dead letters in /metrics", func() bool {
		fams = scrape(t, base)
		return value(fams, "jetagent_dead_letters_total", "reason=not_json") == 1 &&
			value(fams, "jetagent_dead_letters_total", "reason=unknown_server") == 1 &&
			value(fams, "jetagent_jobs_finished_total", "queue=default", "status=dead") == 2
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"jetagent_jobs_started_total", []string{"queue=default"}, 1},
		{"jetagent_jobs_finished_total", []string{"queue=default", "status=succeeded"}, 1},
		{"jetagent_jobs_finished_total", []string{"queue=default", "status=dead"}, 2},
		{"jetagent_jobs_running", nil, 0},
		{"jetagent_job_duration_seconds", []string{"status=succeeded"}, 1},
		{"jetagent_job_queue_wait_seconds", []string{"queue=default"}, 1},
		{"jetagent_dead_letters_total", []string{"reason=unknown_server"}, 1},
		{"jetagent_model_requests_total", []string{"model=scripted-1", "outcome=ok"}, 2},
		{"jetagent_model_request_duration_seconds", []string{"model=scripted-1"}, 2},
		{"jetagent_tool_calls_total", []string{"server=demo", "tool=add", "outcome=ok"}, 1},
		{"jetagent_tool_call_duration_seconds", []string{"server=demo", "tool=add"}, 1},
		{"jetagent_mcp_server_up", []string{"server=demo", "state=ready"}, 1},
		{"jetagent_mcp_connects_total", []string{"server=demo"}, 1},
		{"jetagent_mcp_reconnects_total", []string{"server=demo"}, 0},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, kind := range []string{"prompt", "completion", "tool_definition"} {
		if got := value(fams, "jetagent_model_tokens_total", "model=scripted-1", "kind="+kind); got <= 0 {
			t.Errorf("tokens %s = %v", kind, got)
		}
	}

	// The MCP server dies and cannot restart: not ready, naming it; back
	// again once it can.
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var body string
	waitFor(t, "/readyz to turn unready", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable
	})
	if !strings.Contains(body, "MCP servers not ready: [demo ") {
		t.Errorf("/readyz body %q", body)
	}
	if got := value(scrape(t, base), "jetagent_mcp_server_up", "server=demo"); got != 0 {
		t.Errorf("server up %v after it died", got)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz %d while the MCP server is down", code)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz to be ready again", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == 200
	})
	if got := value(scrape(t, base), "jetagent_mcp_reconnects_total", "server=demo"); got != 1 {
		t.Errorf("reconnects %v", got)
	}
}
