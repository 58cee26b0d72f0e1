package toolcache

import (
	"strings"
	"testing"
)

// A stdio server gets what a program needs to run and what its config
// names, never the worker's secrets or settings.
func TestStdioServerGetsAMinimalEnvironment(t *testing.T) {
	// Not parallel: it sets the process environment.
	secrets := map[string]string{
		"OPENAI_API_KEY":         "sk-worker-secret-1",
		"NATS_PASSWORD":          "nats-worker-secret-2",
		"JETAGENT_SYSTEM_PROMPT": "worker-setting-3",
		"AWS_SECRET_ACCESS_KEY":  "aws-worker-secret-4",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("LC_TIME", "C")
	cfg := stdioTestServer("env")
	cfg.Env["GITHUB_TOKEN"] = "named-in-config"
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"env": cfg}})
	v := newTestView(t, p, nil, nil, nil)
	env := call(t, v, "environ", map[string]any{}).Text
	for k, v := range secrets {
		if strings.Contains(env, v) || strings.Contains(env, k+"=") {
			t.Errorf("the server sees %s", k)
		}
	}
	for _, want := range []string{"PATH=", "HOME=", "LC_TIME=C", "GITHUB_TOKEN=named-in-config", testServerEnv + "=env"} {
		if !strings.Contains(env, want) {
			t.Errorf("the server lacks %s:\n%s", want, env)
		}
	}
}
