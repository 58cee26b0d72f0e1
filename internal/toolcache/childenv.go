package toolcache

import (
	"os"
	"strings"
)

// inheritedEnv are the variables a stdio server gets from the worker's
// environment: what a program needs to run (the MCP TypeScript SDK's
// default set: HOME, LOGNAME, PATH, SHELL, TERM, USER) plus locale, time
// zone and temporary directory. Nothing else is passed on: the worker's
// environment holds its API keys, NATS credentials and JETAGENT_* settings,
// and a server's tools (or a job that asks one to print its environment)
// must never see them. A server that needs a variable names it in its
// config's "env", e.g. "GITHUB_TOKEN": "${GITHUB_TOKEN}".
var inheritedEnv = []string{
	"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER",
	"LANG", "LANGUAGE", "TZ", "TMPDIR",
}

// childEnv is the environment of a stdio server: the inherited variables
// that are set, then the config's own (which win).
func childEnv(configured []string) []string {
	env := make([]string, 0, len(inheritedEnv)+len(configured)+4)
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LC_") { // locale categories
			env = append(env, kv)
		}
	}
	return append(env, configured...)
}
