package toolcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigTypeErrorPosition: a value of the wrong JSON type was named
// by its field only ("server \"foo\": env: must be an object of strings:
// got a number in it"), without the key (PORT) or where it is; a
// hand-edited file is read by line.
func TestConfigTypeErrorPosition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"env value", "{\n  \"servers\": {\n    \"foo\": {\n      \"command\": \"srv\",\n      \"env\": {\"HOST\": \"h\", \"PORT\": 8080}\n    }\n  }\n}\n",
			`toolcache: servers.foo.env.PORT: must be a string: got a number (put it in double quotes) (at line 5, column 36)`},
		{"args a string", "{\"servers\": {\"foo\": {\n\t\"command\": \"srv\",\n\t\"args\": \"x\"}}}",
			`toolcache: servers.foo.args: must be an array of strings: got a string (at line 3, column 10)`},
		{"header value a boolean", "{\"mcpServers\": {\"my server\": {\"url\": \"http://h/mcp\",\n \"headers\": {\"X-Flag\": true}}}}",
			`toolcache: mcpServers["my server"].headers.X-Flag: must be a string: got a boolean (put it in double quotes) (at line 2, column 24)`},
		{"columns count characters", "{\"mcpServers\": {\"café\": {\"command\": \"é\", \"args\": [1]}}}",
			`toolcache: mcpServers["café"].args[0]: must be a string: got a number (put it in double quotes) (at line 1, column 51)`},
		{"a byte order mark is no column", "\xef\xbb\xbf{\"mcpServers\": {\"x\": {\"command\": 1}}}",
			`toolcache: mcpServers.x.command: must be a string: got a number (put it in double quotes) (at line 1, column 34)`},
		{"top-level key in another case", "{\"MCPServers\": {\"x\": {\"command\": \"a\", \"cwd\": []}}}",
			`toolcache: MCPServers.x.cwd: must be a string: got an array (at line 1, column 46)`},
		{"sessionMode an object", "{\"mcpServers\": {\"x\": {\"command\": \"a\",\r\n\"sessionMode\": {}}}}",
			`toolcache: mcpServers.x.sessionMode: must be a string: got an object (at line 2, column 16)`},
		{"mcpServers a string", "{\n\"mcpServers\": \"x\"}",
			`toolcache: "mcpServers" must be an object of servers by name ({"name": {"command": ...}}): got a string (at line 2, column 15)`},
		{"top level an array", "\n\n  [1]",
			`toolcache: the MCP servers file must be a JSON object, {"mcpServers": {...}} (or VS Code's {"servers": {...}}): got an array (at line 3, column 3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfigWithEnv([]byte(tc.in), noEnv)
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant  %s", err, tc.want)
			}
		})
	}
}

func noEnv(string) (string, bool) { return "", false }

// TestConfigFileLimits: files at the edges of JSON, each refused with what
// is wrong and where, or read as a user means them: an empty file, a byte
// order mark, UTF-16, Latin-1, comments, trailing commas, a key given
// twice at any depth (encoding/json keeps one, silently), null.
func TestConfigFileLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		err      string // "" : parses
		servers  int
	}{
		{name: "empty", in: "", err: `toolcache: config is empty: want {"mcpServers": {"name": {"command": ...}}}`},
		{name: "blank", in: " \n\t\r\n", err: `toolcache: config is empty`},
		{name: "no servers", in: `{"mcpServers": {}}`, servers: 0},
		{name: "utf-8 byte order mark", in: "\xef\xbb\xbf{\"mcpServers\": {\"x\": {\"command\": \"a\"}}}", servers: 1},
		{name: "utf-16 LE with mark", in: "\xff\xfe{\x00}\x00", err: `toolcache: config is UTF-16 (Windows PowerShell writes it with ">"): save it as UTF-8`},
		{name: "utf-16 BE without mark", in: "\x00{\x00}", err: `config is UTF-16`},
		{name: "latin-1", in: "{\"mcpServers\": {\"x\": {\n\"command\": \"caf\xe9\"}}}",
			err: `toolcache: config is not UTF-8: byte 0xE9 at line 2, column 16 starts no UTF-8 character (saved as Latin-1 or Windows-1252?): save it as UTF-8`},
		{name: "comment", in: "{\n  // my servers\n  \"mcpServers\": {}}",
			err: `toolcache: config is not valid JSON (a comment: JSON has none (VS Code's editor takes them in its mcp.json; this reader does not): remove it): invalid character '/' looking for beginning of object key string`},
		{name: "block comment", in: "{\"mcpServers\": {\"x\": {\"command\": \"a\" /* b */}}}", err: `(a comment: JSON has none`},
		{name: "trailing comma in object", in: "{\"mcpServers\": {\"x\": {\"command\": \"a\",\n}}}",
			err: `toolcache: config is not valid JSON (a comma after the last entry: JSON has none there: remove it): invalid character '}' looking for beginning of object key string`},
		{name: "trailing comma in array", in: `{"mcpServers": {"x": {"command": "a", "args": ["b", ]}}}`, err: `(a comma after the last entry`},
		{name: "single quotes", in: `{'mcpServers': {}}`, err: `(JSON strings take double quotes)`},
		{name: "section twice", in: "{\"mcpServers\": {\"x\": {\"command\": \"a\"}},\n \"mcpServers\": {\"y\": {\"command\": \"b\"}}}",
			err: `toolcache: "mcpServers" is given twice (at line 1, column 2 and line 2, column 2): JSON readers keep one of them; write one`},
		{name: "section in two cases", in: `{"mcpServers": {"x": {"command": "a"}}, "MCPServers": {"y": {"command": "b"}}}`,
			err: `toolcache: "mcpServers" and "MCPServers" (at line 1, column 2 and line 1, column 41) are one key to this reader, which would merge them: write one`},
		{name: "server twice", in: "{\"mcpServers\": {\n  \"x\": {\"command\": \"a\"},\n  \"x\": {\"command\": \"b\"}}}",
			err: `toolcache: server "x": defined twice in "mcpServers" (at line 2, column 3 and line 3, column 3): the second would replace the first`},
		{name: "key twice in a server", in: `{"mcpServers": {"x": {"command": "a", "command": "b"}}}`,
			err: `toolcache: mcpServers.x: key "command" is given twice (at line 1, column 23 and line 1, column 39): the second would replace the first`},
		{name: "env name twice", in: `{"mcpServers": {"x": {"command": "a", "env": {"TOKEN": "1", "TOKEN": "2"}}}}`,
			err: `toolcache: mcpServers.x.env: key "TOKEN" is given twice`},
		{name: "another client's key twice", in: `{"mcpServers": {"x": {"command": "a", "autoApprove": {"a": 1, "a": 2}}}}`,
			err: `toolcache: mcpServers.x.autoApprove: key "a" is given twice`},
		{name: "same env name in two servers", in: `{"mcpServers": {"x": {"command": "a", "env": {"T": "1"}}, "y": {"command": "a", "env": {"T": "1"}}}}`, servers: 2},
		{name: "section null", in: `{"mcpServers": null}`,
			err: `toolcache: "mcpServers" is null: want an object of servers by name ({"name": {"command": ...}}) (at line 1, column 16)`},
		{name: "server null", in: `{"mcpServers": {"x": null}}`,
			err: `toolcache: mcpServers.x: must be an object ({"command": ...} or {"url": ...}): got null (at line 1, column 22)`},
		{name: "another client's section", in: `{"context_servers": {"x": {"command": "a"}}}`,
			err: `toolcache: config has neither "mcpServers" nor "servers" (its keys: "context_servers")`},
		{name: "empty object", in: `{}`, err: `toolcache: config has neither "mcpServers" nor "servers"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := ParseConfigWithEnv([]byte(tc.in), noEnv)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.err == "" && len(cfg.Servers) != tc.servers:
				t.Errorf("%d servers, want %d", len(cfg.Servers), tc.servers)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err = %v\nwant it to contain %s", err, tc.err)
			}
		})
	}
}

// TestLoadConfigSize: a file over MaxConfigSize (a log named by mistake,
// /dev/zero) is refused after reading at most one byte more, not read
// whole; one just under it is read.
func TestLoadConfigSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	head := []byte(`{"mcpServers": {"x": {"command": "a"}}, "pad": "`)
	tail := []byte(`"}`)
	fits := filepath.Join(dir, "fits.json")
	pad := bytes.Repeat([]byte("a"), MaxConfigSize-len(head)-len(tail))
	if err := os.WriteFile(fits, bytes.Join([][]byte{head, pad, tail}, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadConfig(fits); err != nil || len(cfg.Servers) != 1 {
		t.Errorf("a file of MaxConfigSize: %d servers, err %v", len(cfg.Servers), err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, bytes.Join([][]byte{head, pad, []byte("a"), tail}, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(big)
	if want := "toolcache: read config: " + big + " is over 16 MiB: not an MCP servers file"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := LoadConfig("/dev/zero"); err == nil || !strings.Contains(err.Error(), "is over 16 MiB") {
			t.Errorf("/dev/zero: err = %v", err)
		}
	}
}

// TestConfigEditorVariables: a VS Code mcp.json's ${input:token} (a value
// VS Code prompts for) was left in the value as text, so the server got
// "Bearer ${input:token}" and refused it at the first call; its
// ${workspaceFolder} was said to be an unset environment variable without
// saying why.
func TestConfigEditorVariables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"input in a header", `{"servers": {"gh": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${input:github_token}"}}}, "inputs": [{"id": "github_token", "type": "promptString"}]}`,
			`toolcache: server "gh": headers.Authorization: ${input:github_token} is VS Code's, which asks or looks it up: this reader knows only environment variables, ${NAME} or ${env:NAME}`},
		{"command variable in args", `{"servers": {"x": {"command": "srv", "args": ["${command:pick}"]}}}`, `toolcache: server "x": args[0]: ${command:pick} is VS Code's`},
		{"workspaceFolder", `{"servers": {"x": {"command": "srv", "cwd": "${workspaceFolder}/tools"}}}`,
			`toolcache: server "x": cwd: environment variable workspaceFolder is not set (${workspaceFolder} is a VS Code variable: this reader knows only environment variables)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfigWithEnv([]byte(tc.in), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
	// A shell's ${1:-x} in a script is no VS Code variable.
	if _, err := ParseConfigWithEnv([]byte(`{"servers": {"x": {"command": "sh", "args": ["-c", "exec srv ${1:-8080}"]}}}`), noEnv); err != nil {
		t.Errorf("a shell default: %v", err)
	}
}

// BenchmarkParseConfigShapes: a servers file's cost grows with its size,
// whatever its shape (go test -bench ParseConfigShapes ./internal/toolcache).
// An array nested near encoding/json's depth limit took a second
// (its path was copied at each level); a key of a megabyte took half a
// second (its edit distance to each known key).
func BenchmarkParseConfigShapes(b *testing.B) {
	var many strings.Builder
	many.WriteString(`{"mcpServers": {`)
	for i := range 5000 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"s%d": {"command": "srv", "args": ["--a", "b"], "env": {"A": "1"}, "autoApprove": ["x"]}`, i)
	}
	many.WriteString(`}}`)
	for name, in := range map[string]string{
		"many servers": many.String(),
		"deep":         `{"mcpServers": {"x": {"command": "a", "autoApprove": ` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}}}`,
		"long key":     `{"mcpServers": {"x": {"command": "a", "` + strings.Repeat("k", 1<<20) + `": 1}}}`,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := ParseConfigWithEnv([]byte(in), noEnv); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestConfigWalkDepth: walking a document nested near encoding/json's
// depth limit copied the path at each level (a second, for a file that
// parses in milliseconds): its allocations now do not grow with the
// depth. Not parallel: AllocsPerRun counts every goroutine's.
func TestConfigWalkDepth(t *testing.T) { //nolint:paralleltest // AllocsPerRun counts every goroutine's allocations
	const depth = 9000
	doc := newJSONDoc([]byte(`{"a": ` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`))
	allocs := testing.AllocsPerRun(2, func() {
		if err := doc.walk(func(jsonPath, int, int) bool { return true }); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > depth/10 {
		t.Errorf("%v allocations for a depth of %d", allocs, depth)
	}
}

// TestConfigValueLimits: values each refused at startup with what is
// wrong, which were taken and failed later or meant something else: a
// callTimeout of 1e11 seconds overflowed to "-2562047h47m16s is negative"
// and one under a nanosecond was no timeout; a blank command, or a whole
// command line in "command", failed at every start; "https://" had no
// host; a URL with blanks around it was "not an http(s) URL"; a server
// name with a newline was taken; url.Parse's reason for a password
// holding '#' quoted the password's start ('invalid port ":p" after
// host').
func TestConfigValueLimits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, entry, want string }{
		{"timeout overflow", `{"command": "a", "callTimeout": 1e11}`, `toolcache: mcpServers.x.callTimeout: invalid duration 1e11 seconds (at most 9223372036, about 292 years) (at line 1, column 54)`},
		{"negative timeout overflow", `{"command": "a", "callTimeout": -1e300}`, `invalid duration -1e300 seconds (at most 9223372036`},
		{"timeout under a nanosecond", `{"command": "a", "callTimeout": 1e-10}`, `invalid duration 1e-10 seconds (below a nanosecond, which would be no timeout)`},
		{"blank command", `{"command": " \t"}`, `toolcache: server "x": command: blank`},
		{"command line", `{"command": "sh -c 'exec srv --token sk-abc123def456ghi789'"}`,
			`toolcache: server "x": command: "sh" and 5 more words: a command is one program, not run by a shell; put its arguments in args ("command": "sh", "args": [...])`},
		{"url without host", `{"url": "https://"}`, `toolcache: server "x": url: "https://" has no host`},
		{"url with blanks", `{"url": " https://h/mcp\n"}`, `toolcache: server "x": url: " https://h/mcp\n" has blanks around it`},
		{"password with #", `{"url": "https://user:p#ss@h/mcp"}`, `toolcache: server "x": url: "https://user:xxxxx@h/mcp" does not parse (a '#', '/', '?' or '@' in a password or token must be written %23, %2F, %3F, %40)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfigWithEnv([]byte(`{"mcpServers": {"x": `+tc.entry+`}}`), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %s", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), "sk-abc") || strings.Contains(err.Error(), `":p"`)) {
				t.Errorf("err = %v: shows a secret", err)
			}
		})
	}
	for _, name := range []string{"x\n", " x", "x\t", "a\x00b"} {
		key, _ := json.Marshal(name)
		_, err := ParseConfigWithEnv([]byte(`{"mcpServers": {`+string(key)+`: {"command": "a"}}}`), noEnv)
		if want := "a name with blanks around it or a control character"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("name %q: err = %v", name, err)
		}
	}
	// These stay: a path with a space, a first word that is no program
	// (the start says what is missing), a timeout of 0.
	for _, entry := range []string{`{"command": "/opt/My Server/bin/srv"}`, `{"command": "no-such-program-xyz --flag"}`, `{"command": "a", "callTimeout": 0}`} {
		if _, err := ParseConfigWithEnv([]byte(`{"mcpServers": {"x": `+entry+`}}`), noEnv); err != nil {
			t.Errorf("%s: %v", entry, err)
		}
	}
}

// TestConfigLookAlikes: a key with a Cyrillic letter for a Latin one was
// quoted as it is, so the error showed two identical names ("unknown key
// "соmmand": did you mean "command"?"); an env name with one was passed
// on, and the server never saw the variable it reads.
func TestConfigLookAlikes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"server key", `{"mcpServers": {"x": {"command": "a", "sessionМode": "per-job"}}}`, `unknown key "session\u041code": did you mean "sessionMode"?`},
		{"section", `{"mсpServers": {"x": {"command": "a"}}}`, `config has neither "mcpServers" nor "servers" (its keys: "m\u0441pServers")`},
		{"env name", `{"mcpServers": {"x": {"command": "a", "env": {"GITHUB_TОKEN": "t"}}}}`,
			`toolcache: server "x": env: "GITHUB_T\u041eKEN" holds U+041E, not ASCII (a look-alike of a Latin letter?): a shell cannot set it, nor a server expect it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfigWithEnv([]byte(tc.in), noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %s", err, tc.want)
			}
		})
	}
}
