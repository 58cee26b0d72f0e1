package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// TestComposeFile loads the top-level docker-compose.yml with the
// compose-spec loader (what docker compose runs) and checks it against the
// worker itself: the worker service's environment is one loadSettings
// accepts, the MCP servers file it names (shipped in the image from
// deploy/) loads, two replicas, NATS with JetStream on a volume. No image
// is built here (no Docker daemon): the Dockerfile is not exercised.
func TestComposeFile(t *testing.T) {
	// Not parallel: it sets the environment the worker reads.
	opts, err := cli.NewProjectOptions([]string{"../../docker-compose.yml"},
		cli.WithWorkingDirectory("../.."),
		// The model settings come from the operator's environment.
		cli.WithEnv([]string{"OPENAI_API_KEY=sk-test", "OPENAI_MODEL=gpt-test"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}

	nats, err := p.GetService("nats")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(nats.Command, "--jetstream") || len(nats.Volumes) != 1 || nats.Volumes[0].Type != "volume" ||
		!slices.Contains(nats.Command, nats.Volumes[0].Target) {
		t.Errorf("nats: command %v volumes %+v: want JetStream stored on a named volume", nats.Command, nats.Volumes)
	}

	w, err := p.GetService("worker")
	if err != nil {
		t.Fatal(err)
	}
	if w.Deploy == nil || w.Deploy.Replicas == nil || *w.Deploy.Replicas != 2 {
		t.Errorf("worker replicas: %+v", w.Deploy)
	}
	if w.Build == nil {
		t.Error("worker: no build (the Dockerfile)")
	}
	env := map[string]string{}
	for k, v := range w.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	if env["OPENAI_API_KEY"] != "sk-test" || env["OPENAI_MODEL"] != "gpt-test" {
		t.Errorf("model settings not passed through: %v", env)
	}
	if !strings.HasPrefix(env["NATS_URL"], "nats://nats:") {
		t.Errorf("NATS_URL %q does not point at the nats service", env["NATS_URL"])
	}
	// Every variable is the worker's, and the worker accepts the values.
	known := map[string]bool{}
	for _, line := range strings.Split(helpText(t), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			known[f[0]] = true
		}
	}
	for k, v := range env {
		if !known[k] {
			t.Errorf("worker environment %s: not a variable the worker reads", k)
		}
		t.Setenv(k, v)
	}
	s, err := loadSettings()
	if err != nil {
		t.Fatalf("the worker refuses the compose environment: %v", err)
	}
	if s.MetricsAddr == "" || len(w.Expose) == 0 || !strings.HasSuffix(s.MetricsAddr, ":"+w.Expose[0]) {
		t.Errorf("metrics on %q, exposed %v", s.MetricsAddr, w.Expose)
	}
	// The servers file the image carries at JETAGENT_MCP_CONFIG.
	if s.MCPConfig != "/etc/jetagent/mcp.json" {
		t.Errorf("JETAGENT_MCP_CONFIG %q, the image has /etc/jetagent/mcp.json", s.MCPConfig)
	}
	if _, err := toolcache.LoadConfig("../../deploy/mcp.json"); err != nil {
		t.Errorf("deploy/mcp.json: %v", err)
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"COPY deploy/mcp.json /etc/jetagent/mcp.json", "USER nonroot", "./cmd/worker ./cmd/submit ./examples/mcpserver"} {
		if !strings.Contains(string(dockerfile), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// helpText is worker --help.
func helpText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	if err := writeUsage(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
