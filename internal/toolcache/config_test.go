package toolcache

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GH_TOKEN": "s3cret", "HOME_DIR": "/home/u"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name string
		in   string
		want map[string]ServerConfig
		err  string
	}{
		{
			name: "claude desktop stdio with env expansion",
			in: `{"mcpServers": {"github": {"command": "github-mcp-server", "args": ["stdio", "--home=${HOME_DIR}"],
				"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GH_TOKEN}"}, "cwd": "/tmp"}}}`,
			want: map[string]ServerConfig{"github": {
				Command: "github-mcp-server", Args: []string{"stdio", "--home=/home/u"},
				Env: map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "s3cret"}, Cwd: "/tmp",
				Type: TypeStdio, SessionMode: SessionShared,
			}},
		},
		{
			name: "vs code servers key, env: prefix, options",
			in: `{"servers": {"api": {"type": "http", "url": "https://mcp.example.com/mcp",
				"headers": {"Authorization": "Bearer ${env:GH_TOKEN}"},
				"callTimeout": "45s", "maxConcurrent": 4, "sessionMode": "per-job",
				"allow": ["get_*"], "deny": ["*delete*"]}}, "inputs": []}`,
			want: map[string]ServerConfig{"api": {
				URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"},
				Type: TypeHTTP, CallTimeout: Duration(45 * time.Second), MaxConcurrent: 4,
				SessionMode: SessionPerJob, Allow: []string{"get_*"}, Deny: []string{"*delete*"},
			}},
		},
		{
			name: "url infers http, sse explicit, numeric timeout, disabled",
			in: `{"mcpServers": {"a": {"url": "http://localhost:1/mcp"}, "b": {"url": "http://localhost:2/sse", "type": "sse", "callTimeout": 2.5},
				"c": {"command": "x", "disabled": true}, "d": {"url": "http://h/mcp", "type": "streamable-http"}}}`,
			want: map[string]ServerConfig{
				"a": {URL: "http://localhost:1/mcp", Type: TypeHTTP, SessionMode: SessionShared},
				"b": {URL: "http://localhost:2/sse", Type: TypeSSE, SessionMode: SessionShared, CallTimeout: Duration(2500 * time.Millisecond)},
				"c": {Command: "x", Type: TypeStdio, SessionMode: SessionShared, Disabled: true},
				"d": {URL: "http://h/mcp", Type: TypeHTTP, SessionMode: SessionShared},
			},
		},
		{
			name: "sessionless protocol for http and stdio",
			in:   `{"mcpServers": {"gw": {"url": "https://gw.example.com/mcp", "protocol": "2026-07-28"}, "local": {"command": "srv", "protocol": "2026-07-28"}}}`,
			want: map[string]ServerConfig{
				"gw":    {URL: "https://gw.example.com/mcp", Type: TypeHTTP, SessionMode: SessionShared, Protocol: ProtocolSessionless},
				"local": {Command: "srv", Type: TypeStdio, SessionMode: SessionShared, Protocol: ProtocolSessionless},
			},
		},
		{name: "protocol not sessionless", in: `{"mcpServers": {"x": {"command": "a", "protocol": "2025-11-25"}}}`, err: `server "x": protocol: "2025-11-25" (want "2026-07-28"`},
		{name: "protocol with protocolVersion", in: `{"mcpServers": {"x": {"command": "a", "protocol": "2026-07-28", "protocolVersion": "2025-06-18"}}}`, err: `server "x": protocol and protocolVersion: give one`},
		{name: "protocol over sse", in: `{"mcpServers": {"x": {"url": "http://a/sse", "type": "sse", "protocol": "2026-07-28"}}}`, err: `server "x": protocol: 2026-07-28 is not spoken over sse`},
		{name: "not json", in: `{"mcpServers": `, err: "not valid JSON"},
		// A misspelt key would leave its setting at the default, silently.
		{name: "misspelt key", in: `{"mcpServers": {"x": {"command": "a", "sessionMod": "per-job"}}}`, err: `server "x": unknown key "sessionMod": did you mean "sessionMode"?`},
		{name: "key in the wrong case", in: `{"mcpServers": {"x": {"command": "a", "calltimeout": "5s"}}}`, err: `unknown key "calltimeout": did you mean "callTimeout"?`},
		{name: "swapped letters", in: `{"mcpServers": {"x": {"command": "a", "toolHitns": {}}}}`, err: `did you mean "toolHints"?`},
		{
			// Other clients' keys are theirs: one file serves several.
			name: "other clients' keys are ignored",
			in:   `{"mcpServers": {"x": {"command": "a", "autoApprove": ["read"], "alwaysAllow": [], "timeout": 60, "transportType": "stdio", "enabled": true, "envFile": "x.env", "name": "x"}}}`,
			want: map[string]ServerConfig{"x": {Command: "a", Type: TypeStdio, SessionMode: SessionShared}},
		},
		{name: "no servers key", in: `{"tools": {}}`, err: `neither "mcpServers" nor "servers"`},
		{name: "both command and url", in: `{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}`, err: `server "x": command and url`},
		{name: "neither", in: `{"mcpServers": {"x": {"args": ["a"]}}}`, err: `server "x": command or url`},
		{name: "unknown type", in: `{"mcpServers": {"x": {"url": "http://b", "type": "ws"}}}`, err: `server "x": type: unknown transport "ws"`},
		{name: "stdio type with url", in: `{"mcpServers": {"x": {"url": "http://b", "type": "stdio"}}}`, err: `server "x": type: stdio needs command`},
		{name: "sse with command", in: `{"mcpServers": {"x": {"command": "a", "type": "sse"}}}`, err: `server "x": type: "sse" does not go with command`},
		{name: "bad url", in: `{"mcpServers": {"x": {"url": "localhost:8080"}}}`, err: `server "x": url: "localhost:8080" is not an http(s) URL`},
		{name: "headers on stdio", in: `{"mcpServers": {"x": {"command": "a", "headers": {"A": "b"}}}}`, err: `server "x": headers: only for http and sse`},
		{name: "args on http", in: `{"mcpServers": {"x": {"url": "http://a", "args": ["b"]}}}`, err: `server "x": args, env, cwd: only for stdio`},
		{
			// Enum values are taken in any case, type's as sessionMode's.
			name: "enum values in another case",
			in:   `{"mcpServers": {"a": {"url": "http://h/sse", "type": "SSE", "sessionMode": "Per-Job"}, "b": {"command": "x", "sessionMode": "SHARED"}}}`,
			want: map[string]ServerConfig{
				"a": {URL: "http://h/sse", Type: TypeSSE, SessionMode: SessionPerJob},
				"b": {Command: "x", Type: TypeStdio, SessionMode: SessionShared},
			},
		},
		{name: "session mode", in: `{"mcpServers": {"x": {"command": "a", "sessionMode": "pooled"}}}`, err: `server "x": sessionMode: "pooled"`},
		{name: "negative concurrency", in: `{"mcpServers": {"x": {"command": "a", "maxConcurrent": -1}}}`, err: `server "x": maxConcurrent: -1 is negative`},
		{name: "bad duration", in: `{"mcpServers": {"x": {"command": "a", "callTimeout": "soon"}}}`, err: `toolcache: mcpServers.x.callTimeout: invalid duration "soon" (want e.g. "30s") (at line 1, column 54)`},
		{name: "bad glob", in: `{"mcpServers": {"x": {"command": "a", "deny": ["ok", "[x"]}}}`, err: `server "x": deny[1]: bad glob "[x"`},
		{name: "unset variable", in: `{"mcpServers": {"x": {"url": "http://a", "headers": {"Authorization": "Bearer ${NOPE}"}}}}`, err: `server "x": headers.Authorization: environment variable NOPE is not set`},
		{name: "modern protocol pinned", in: `{"mcpServers": {"x": {"command": "a", "protocolVersion": "2026-07-28"}}}`, err: `server "x": protocolVersion: "2026-07-28"`},
		{name: "same name twice", in: `{"mcpServers": {"x": {"command": "a"}}, "servers": {"x": {"command": "b"}}}`, err: `server "x": defined in both`},
		// encoding/json keeps the last of two equal keys: the first server would be dropped silently.
		{name: "same name twice in one object", in: `{"mcpServers": {"x": {"command": "a"}, "y": {"command": "c"}, "x": {"command": "b"}}}`, err: `server "x": defined twice in "mcpServers"`},
		{name: "names differing only in case", in: `{"mcpServers": {"Files": {"command": "a"}, "files": {"command": "b"}}}`, err: `servers "Files" and "files": names that differ only in case`},
		{name: "case clash across objects", in: `{"mcpServers": {"GH": {"command": "a"}}, "servers": {"gh": {"command": "b"}}}`, err: `servers "GH" and "gh"`},
		{name: "empty server name", in: `{"mcpServers": {"": {"command": "a"}}}`, err: `server "": a server needs a name`},
		// "A=B": "x" would set A to "B=x" in the child.
		{name: "env name with =", in: `{"mcpServers": {"x": {"command": "a", "env": {"A=B": "x"}}}}`, err: `server "x": env: "A=B" is not a variable name`},
		{name: "env value with NUL", in: `{"mcpServers": {"x": {"command": "a", "env": {"T": "${GH_TOKEN}\u0000"}}}}`, err: `server "x": env.T: the value holds a NUL byte`},
		{name: "env value with newline is fine", in: `{"mcpServers": {"x": {"command": "a", "env": {"T": "a\nb"}}}}`,
			want: map[string]ServerConfig{"x": {Command: "a", Env: map[string]string{"T": "a\nb"}, Type: TypeStdio, SessionMode: SessionShared}}},
		{name: "header value with newline", in: `{"mcpServers": {"x": {"url": "http://a", "headers": {"Authorization": "Bearer ${GH_TOKEN}\nX-Evil: 1"}}}}`, err: `server "x": headers.Authorization: the value holds a line break or NUL at byte 13 of 23`},
		// A value of the wrong JSON type is said in the file's words, not
		// Go's ("cannot unmarshal array into Go value of type struct {...}").
		{name: "top level an array", in: `[{"mcpServers": {}}]`, err: `toolcache: the MCP servers file must be a JSON object, {"mcpServers": {...}} (or VS Code's {"servers": {...}}): got an array`},
		{name: "top level a string", in: `"servers.json"`, err: `must be a JSON object, {"mcpServers": {...}} (or VS Code's {"servers": {...}}): got a string`},
		{name: "top level a number", in: `42`, err: `must be a JSON object, {"mcpServers": {...}} (or VS Code's {"servers": {...}}): got a number`},
		{name: "mcpServers an array", in: `{"mcpServers": [{"command": "a"}]}`, err: `toolcache: "mcpServers" must be an object of servers by name ({"name": {"command": ...}}): got an array`},
		{name: "server a string", in: `{"mcpServers": {"x": "npx server"}}`, err: `toolcache: mcpServers.x: must be an object ({"command": ...} or {"url": ...}): got a string (at line 1, column 22)`},
		{name: "args a string", in: `{"mcpServers": {"x": {"command": "a", "args": "--port 1"}}}`, err: `toolcache: mcpServers.x.args: must be an array of strings: got a string (at line 1, column 47)`},
		{name: "args holding a number", in: `{"mcpServers": {"x": {"command": "a", "args": ["--port", 1]}}}`, err: `toolcache: mcpServers.x.args[1]: must be a string: got a number (put it in double quotes) (at line 1, column 58)`},
		{name: "env a list", in: `{"mcpServers": {"x": {"command": "a", "env": ["A=1"]}}}`, err: `toolcache: mcpServers.x.env: must be an object of strings: got an array (at line 1, column 46)`},
		{name: "env value a number", in: `{"mcpServers": {"x": {"command": "a", "env": {"PORT": 8080}}}}`, err: `toolcache: mcpServers.x.env.PORT: must be a string: got a number (put it in double quotes) (at line 1, column 55)`},
		{name: "maxConcurrent a string", in: `{"mcpServers": {"x": {"command": "a", "maxConcurrent": "4"}}}`, err: `toolcache: mcpServers.x.maxConcurrent: must be a whole number: got a string (at line 1, column 56)`},
		{name: "maxConcurrent a fraction", in: `{"mcpServers": {"x": {"command": "a", "maxConcurrent": 1.5}}}`, err: `toolcache: mcpServers.x.maxConcurrent: must be a whole number: got the number 1.5 (at line 1, column 56)`},
		{name: "servers an array, with a boolean", in: `{"servers": {"x": {"command": "a", "allow": [true]}}}`, err: `toolcache: servers.x.allow[0]: must be a string: got a boolean (put it in double quotes) (at line 1, column 46)`},
		{name: "disabled a string", in: `{"mcpServers": {"x": {"command": "a", "disabled": "yes"}}}`, err: `toolcache: mcpServers.x.disabled: must be true or false: got a string (at line 1, column 51)`},
		{name: "toolHints hint a string", in: `{"mcpServers": {"x": {"command": "a", "toolHints": {"get_*": {"readOnlyHint": "true"}}}}}`, err: `toolcache: mcpServers.x.toolHints["get_*"].readOnlyHint: must be true or false: got a string (at line 1, column 79)`},
		{name: "header name not a token", in: `{"mcpServers": {"x": {"url": "http://a", "headers": {"Bad Name": "v"}}}}`, err: `server "x": headers: "Bad Name" is not an HTTP header name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := ParseConfigWithEnv([]byte(tc.in), lookup)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "unmarshal") {
					t.Errorf("err = %v: Go's words", err)
				}
				if strings.Contains(err.Error(), env["GH_TOKEN"]) {
					t.Errorf("err = %v: shows the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Servers, tc.want) {
				t.Errorf("got  %+v\nwant %+v", cfg.Servers, tc.want)
			}
		})
	}
}

func TestLoadConfigExpandsProcessEnv(t *testing.T) {
	t.Setenv("TOOLCACHE_TEST_TOKEN", "from-env")
	path := t.TempDir() + "/mcp.json"
	writeFile(t, path, `{"mcpServers": {"x": {"command": "srv", "env": {"TOKEN": "${TOOLCACHE_TEST_TOKEN}"}}}}`)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Servers["x"].Env["TOKEN"]; got != "from-env" {
		t.Errorf("TOKEN = %q", got)
	}
	if _, err := LoadConfig(path + ".missing"); err == nil {
		t.Error("missing file accepted")
	}
}

func TestNewPoolRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	_, err := NewPool(t.Context(), Config{Servers: map[string]ServerConfig{"x": {}}})
	if err == nil || !strings.Contains(err.Error(), `server "x"`) {
		t.Fatalf("err = %v", err)
	}
}
