package toolcache

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/redact"
)

// addEnvironTools gives the stdio test server "secrets" tools, a resource
// and a tool definition that show its environment in every way a server
// answers (see TestServersEchoedSecretsMasked).
func addEnvironTools(s *server.MCPServer) {
	environ := func() string {
		env := os.Environ()
		sort.Strings(env)
		return strings.Join(env, "\n")
	}
	asMap := func() map[string]any {
		m := map[string]any{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	tok := os.Getenv("GITHUB_TOKEN")
	s.AddTool(mcp.NewTool("environ_structured", mcp.WithDescription("The environment as structured content.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			m := asMap()
			b, _ := json.Marshal(m)
			return mcp.NewToolResultStructured(map[string]any{"env": m, tok: "a key named by the token", os.Getenv("DB_PASSWORD"): "a key named by the password", "pin": json.Number(os.Getenv("BANK_SECRET"))}, string(b)), nil
		})
	s.AddTool(mcp.NewTool("environ_error", mcp.WithDescription("Fails, quoting the environment.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("refused with " + environ()), nil
		})
	s.AddTool(mcp.NewTool("environ_embedded", mcp.WithDescription("The environment as an embedded resource.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewEmbeddedResource(mcp.TextResourceContents{URI: "env://environ", Text: environ()})}}, nil
		})
	s.AddTool(mcp.NewTool("about", mcp.WithToolTitle("GitHub as "+tok), mcp.WithDescription("Calls GitHub with token "+tok+"."),
		mcp.WithString("token", mcp.Description("defaults to "+tok), mcp.DefaultString(tok))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	s.AddTool(mcp.NewTool("log_environ", mcp.WithDescription("Logs the token as a notifications/message.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = s.SendNotificationToClient(ctx, "notifications/message", map[string]any{
				"level": "info", "logger": "environ", "data": map[string]any{"msg": "using " + tok, tok: []any{tok}},
			})
			return mcp.NewToolResultText("logged"), nil
		})
	s.AddTool(mcp.NewTool("token_checked", mcp.WithDescription("The token as structured content its outputSchema describes."),
		mcp.WithRawOutputSchema(json.RawMessage(tokenSchema))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructured(map[string]any{"token": tok}, "the token is "+tok), nil
		})
	s.AddTool(mcp.NewTool("token_split", mcp.WithDescription("The token cut in two content blocks.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("token: " + tok[:17]), mcp.NewTextContent(tok[17:] + " (end)")}}, nil
		})
	s.AddTool(mcp.NewTool("token_escaped", mcp.WithDescription("The token as structured content, its letters written as \\u escapes.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var esc strings.Builder
			for _, c := range tok {
				fmt.Fprintf(&esc, `\u%04x`, c)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: json.RawMessage(`{"token":"` + esc.String() + `"}`)}, nil
		})
	s.AddResource(mcp.NewResource("env://environ", "environ", mcp.WithMIMEType("text/plain"), mcp.WithResourceDescription("the environment with "+tok)),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "env://environ", Text: environ()}}, nil
		})
	s.AddResource(mcp.NewResource("env://token/"+tok, "by-token"),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: "read by a URI holding the token"}}, nil
		})
}

// echoedEnv is the "env" of the stdio server of
// TestServersEchoedSecretsMasked: credentials, and values that are not
// or are too short or plain to mask.
var echoedEnv = map[string]string{
	"GITHUB_TOKEN":    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
	"DB_PASSWORD":     `hunter2-"quoted"\path<&>`,
	"API_KEY":         "8f14e45f-ceea-467f-a0e6-3a9b2c1d0e7f", // a UUID, named a key
	"TEAM_ID":         "123e4567-e89b-12d3-a456-426614174000", // a UUID, no credential
	"NODE_ENV":        "production",
	"DEBUG":           "1",
	"AUTH_MODE":       "oauth-device",
	"TOKEN_FILE":      "/run/secrets/gh-token",
	"SESSION_TIMEOUT": "86400000",
	"SHORT_SECRET":    "abc12",
	"BANK_SECRET":     "4111111111111111111", // a named number of 19 digits
}

// echoedSecrets are the values of echoedEnv to be masked.
var echoedSecrets = []string{"GITHUB_TOKEN", "DB_PASSWORD", "API_KEY", "BANK_SECRET"}

// TestServersEchoedSecretsMasked: a stdio server given GITHUB_TOKEN (and
// other credentials) in its "env" put them before the model, into the
// events and the transcripts whenever one of its tools printed its
// environment: only errors, status and logs were masked. Every way a
// server answers is masked now: text, structured content (as JSON, with
// its escapes), error results, embedded and read resources, the
// resource listing, the tools' titles, descriptions and schemas, and
// the notifications passed on; ordinary values (a path, "production",
// "1", an id) are left readable.
func TestServersEchoedSecretsMasked(t *testing.T) {
	t.Parallel()
	sc := stdioTestServer("secrets")
	for k, v := range echoedEnv {
		sc.Env[k] = v
	}
	n := newNotes()
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": sc}}, n.option())
	v := newTestView(t, p, nil, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shown := map[string]string{}
	for _, tool := range []string{"environ", "environ_structured", "environ_error", "environ_embedded"} {
		res, err := v.CallTool(ctx, tool, json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		shown[tool+" text"] = res.Text
		if res.Structured != nil {
			shown[tool+" structured"] = string(res.Structured)
			if !json.Valid(res.Structured) {
				t.Errorf("%s: structured content no longer JSON: %s", tool, res.Structured)
			}
		}
	}
	rs, err := v.ListResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rs)
	shown["resource list"] = string(b)
	text, err := v.ReadResource(ctx, "env://environ")
	if err != nil {
		t.Fatal(err)
	}
	shown["resource read"] = text
	for _, r := range rs {
		if r.Name == "by-token" {
			if r.URI != "env://token/xxxxx" {
				t.Errorf("listed URI %q, want the token masked", r.URI)
			}
			if got, err := v.ReadResource(ctx, r.URI); err != nil || got != "read by a URI holding the token" {
				t.Errorf("read by the masked URI %q: %q, %v", r.URI, got, err)
			}
		}
	}
	about, ok := v.Get("about")
	if !ok {
		t.Fatal("no tool about")
	}
	b, _ = json.Marshal(about)
	shown["tool definition"] = string(b)
	if about.Description != "Calls GitHub with token xxxxx." {
		t.Errorf("description %q", about.Description)
	}
	for _, st := range p.Status() {
		shown["status"] += st.ServerName + " " + st.ServerVer + "\n"
	}
	if want := "secrets xxxxx 1.0.0\n"; shown["status"] != want {
		t.Errorf("status names the server %q, want %q", shown["status"], want)
	}
	call(t, v, "log_environ", map[string]any{})
	note := n.wait(t, "notifications/message", "")
	b, _ = json.Marshal(note)
	shown["notification"] = string(b)

	for what, text := range shown {
		for _, k := range echoedSecrets {
			for _, f := range redact.Forms(echoedEnv[k]) {
				if strings.Contains(text, f) {
					t.Errorf("%s shows %s (as %q):\n%.2000s", what, k, f, text)
				}
			}
		}
	}
	for _, what := range []string{"environ text", "environ_error text", "environ_embedded text", "resource read"} {
		for _, want := range []string{"GITHUB_TOKEN=xxxxx", "DB_PASSWORD=xxxxx", "API_KEY=xxxxx",
			"TEAM_ID=123e4567-e89b-12d3-a456-426614174000", "NODE_ENV=production", "DEBUG=1", "AUTH_MODE=oauth-device",
			"TOKEN_FILE=/run/secrets/gh-token", "SESSION_TIMEOUT=86400000", "SHORT_SECRET=abc12"} {
			if !strings.Contains(shown[what], want) {
				t.Errorf("%s lacks %q:\n%.3000s", what, want, shown[what])
			}
		}
	}
	if s := shown["environ_structured structured"]; !strings.Contains(s, `"DB_PASSWORD":"xxxxx"`) || !strings.Contains(s, `"pin":"xxxxx"`) {
		t.Errorf("structured content: %.3000s", s)
	}
	// The two keys named by a secret are both "xxxxx" masked: each keeps
	// its value, one of them as "xxxxx#2".
	var top map[string]any
	_ = json.Unmarshal([]byte(shown["environ_structured structured"]), &top)
	keyed := map[string]string{}
	for k, v := range top {
		if s, ok := v.(string); ok {
			keyed[s] = k
		}
	}
	if keyed["a key named by the token"]+" "+keyed["a key named by the password"] != "xxxxx xxxxx#2" &&
		keyed["a key named by the token"]+" "+keyed["a key named by the password"] != "xxxxx#2 xxxxx" {
		t.Errorf("the keys named by secrets: %q, want xxxxx and xxxxx#2", keyed)
	}
}

// TestHTTPServersEchoedSecretsMasked: an HTTP server that echoes how it
// was reached (its Authorization header, the Basic authorization the
// pool makes of a URL's user:password, an X-Api-Key, its URL's
// ?api_key=) showed those credentials in its tools' results. They are
// masked in redact's style: "Bearer xxxxx", "Basic xxxxx", "api_key=xxxxx".
func TestHTTPServersEchoedSecretsMasked(t *testing.T) {
	t.Parallel()
	type urlKey struct{}
	s := server.NewMCPServer("echo-auth", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("whoami", mcp.WithDescription("How the server was reached.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u, _ := ctx.Value(urlKey{}).(string)
			return mcp.NewToolResultText("authorization: " + req.Header.Get("Authorization") + "\nx-api-key: " + req.Header.Get("X-Api-Key") + "\nurl: " + u), nil
		})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
		return context.WithValue(ctx, urlKey{}, r.URL.String())
	})))
	t.Cleanup(ts.Close)
	const (
		pass   = "pw-0123456789abcdef"
		query  = "q-9876543210fedcba"
		bearer = "ghs_Bearer0123456789abcdefABCDEF"
		apiKey = "key-5555aaaa7777bbbb"
	)
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + pass))
	for _, tc := range []struct {
		name    string
		sc      ServerConfig
		secrets []string
		want    []string
	}{
		{"userinfo and query", ServerConfig{URL: strings.Replace(ts.URL, "http://", "http://user:"+pass+"@", 1) + "/mcp?api_key=" + query},
			[]string{pass, query, basic}, []string{"authorization: Basic xxxxx", "url: /mcp?api_key=xxxxx"}},
		{"headers", ServerConfig{URL: ts.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + bearer, "X-Api-Key": apiKey}},
			[]string{bearer, apiKey}, []string{"authorization: Bearer xxxxx", "x-api-key: xxxxx"}},
		{"basic header", ServerConfig{URL: ts.URL + "/mcp", Headers: map[string]string{"Authorization": "Basic " + basic}},
			[]string{pass, basic}, []string{"authorization: Basic xxxxx"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": tc.sc}})
			v := newTestView(t, p, nil, nil, nil)
			got := call(t, v, "whoami", map[string]any{}).Text
			for _, sec := range tc.secrets {
				if strings.Contains(got, sec) {
					t.Errorf("result shows %q:\n%s", sec, got)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("result lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestAnswerSecrets: which configured values are masked in answers (by
// name unless ordinary, by look unless a UUID, at least 8 bytes, with
// their encodings) and which stay readable; errors take the short ones
// and the encodings too.
func TestAnswerSecrets(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	servers := map[string]ServerConfig{
		"stdio": {Command: "srv", Args: []string{"--api-key=argKey-0123456789", "--token-file", "/run/secrets/tok", "--project", "8f14e45f-ceea-467f-a0e6-3a9b2c1d0e7f"},
			Env: map[string]string{
				"GITHUB_TOKEN": "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "DB_PASSWORD": "hunter22hunter", "API_KEY": "123e4567-e89b-12d3-a456-426614174000",
				"NODE_ENV": "production", "DEBUG": "1", "AUTH_MODE": "oauth-device", "AUTH_ENABLED": "true", "SESSION_TIMEOUT": "86400000",
				"AUTH_URL": "https://auth.example.com/oauth/token", "SECRET_PHRASE": "correct horse battery staple", "SHORT_KEY": "k3y12",
				"GOOGLE_APPLICATION_CREDENTIALS": "/home/me/creds.json", "DATA": "x7Kp2mQ9vL4nR8sT1wY6zB3c",
				// A directory named of words and digits (t.TempDir's) reads as a key by its look.
				"WORK_DIR": "/tmp/TestCodeModeE2E1234567890/001", "TOKEN_DIR": "/tmp/TestAnswerSecrets2718281828/002",
			}},
		"http": {URL: "https://user:pw-s3cr3t-99@host/mcp?api_key=q-0123456789&page=2",
			Headers: map[string]string{"Cookie": "sid=cookieValue123; theme=dark", "X-Api-Key": "hdrKey-0123456789"}},
		"basic":  {URL: "https://host/mcp", Headers: map[string]string{"Authorization": "Basic " + b64("me:basicPass-42")}},
		"bearer": {URL: "https://host/mcp", Headers: map[string]string{"Authorization": "Bearer bearerTok-0123456789"}},
		"short":  {URL: "https://u:pw12@host/mcp"},
	}
	shown := answerSecrets(servers)
	for _, want := range []string{"argKey-0123456789", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "hunter22hunter", "123e4567-e89b-12d3-a456-426614174000",
		"correct horse battery staple", "x7Kp2mQ9vL4nR8sT1wY6zB3c", "pw-s3cr3t-99", b64("user:pw-s3cr3t-99"), "q-0123456789", "cookieValue123",
		"hdrKey-0123456789", "basicPass-42", b64("me:basicPass-42"), "bearerTok-0123456789", b64("u:pw12"),
		`correct horse battery staple`, "correct+horse+battery+staple", "correct%20horse%20battery%20staple"} {
		if !contains(shown, want) {
			t.Errorf("answerSecrets lacks %q", want)
		}
	}
	for _, not := range []string{"/run/secrets/tok", "8f14e45f-ceea-467f-a0e6-3a9b2c1d0e7f", "production", "1", "oauth-device", "true", "86400000",
		"https://auth.example.com/oauth/token", "k3y12", "/home/me/creds.json", "/tmp/TestCodeModeE2E1234567890/001", "/tmp/TestAnswerSecrets2718281828/002", "pw12", "sid=cookieValue123; theme=dark", "dark",
		"Basic " + b64("me:basicPass-42"), "Bearer bearerTok-0123456789"} {
		if contains(shown, not) {
			t.Errorf("answerSecrets has %q, which answers show for their own reasons or is masked in parts", not)
		}
	}
	errs := errorSecrets(servers)
	for _, want := range []string{"pw12", b64("u:pw12"), b64("user:pw-s3cr3t-99"), "basicPass-42", "Bearer bearerTok-0123456789", "bearerTok-0123456789"} {
		if !contains(errs, want) {
			t.Errorf("errorSecrets lacks %q", want)
		}
	}
}

// TestBasicAuthorizationScrubbedFromErrors: the pool sends a URL's
// user:password as Basic authorization; a server refusing it with the
// header quoted ("bad credentials: Basic dXNlcj...") showed the base64 of
// the password in the status and the log, where only the password as
// written was masked.
func TestBasicAuthorizationScrubbedFromErrors(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad credentials: "+r.Header.Get("Authorization"), http.StatusInternalServerError) // a 401 is not quoted
	}))
	t.Cleanup(echo.Close)
	const pass = "pw-0123456789abcdef"
	var log lockedLog
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 10*time.Second, 0, time.Hour, time.Hour
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": {URL: strings.Replace(echo.URL, "http://", "http://user:"+pass+"@", 1) + "/mcp"}}},
		WithSettings(s), WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	st := statusOf(p, "srv")
	if st.State != StateFailed || !strings.Contains(st.Error, "bad credentials: Basic xxxxx") {
		t.Errorf("status %s: %q; want the refusal quoted, masked", st.State, st.Error)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + pass))
	for what, text := range map[string]string{"status": st.Error, "log": log.String()} {
		if strings.Contains(text, basic) || strings.Contains(text, pass) {
			t.Errorf("the %s shows the credentials:\n%s", what, text)
		}
	}
}

// TestCutSecretsMaskedInHints: the stderr a server left (its last 400
// bytes) and the stray stdout line it wrote (its first 200) are quoted in
// its errors; a cut through a secret showed the secret's part that was
// kept, which no exact match finds (a 15-byte end of the token, a
// 29-byte start).
func TestCutSecretsMaskedInHints(t *testing.T) {
	t.Parallel()
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	env := map[string]string{"GITHUB_TOKEN": tok}
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 10*time.Second, 0, time.Hour, time.Hour
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{
		"stderr": {Command: "sh", Args: []string{"-c", `printf 'token %s %0385d\n' "$GITHUB_TOKEN" 0 >&2; exit 3`}, Env: env},
		"stdout": {Command: "sh", Args: []string{"-c", `printf '%0170d %s\n' 0 "$GITHUB_TOKEN"; exit 2`}, Env: env},
	}}, WithSettings(s))
	want := map[string]string{"stderr": "(server stderr: token xxxxx 000", "stdout": `(server stdout, not JSON-RPC: "0000`}
	for _, st := range p.Status() {
		if !strings.Contains(st.Error, want[st.Name]) {
			t.Errorf("%s: %q, want the hint %q", st.Name, st.Error, want[st.Name])
		}
		for i := 0; i+6 <= len(tok); i++ {
			if strings.Contains(st.Error, tok[i:i+6]) {
				t.Errorf("%s: %q shows %q of the token", st.Name, st.Error, tok[i:i+6])
				break
			}
		}
	}
}

// TestNotificationKeysStayDistinct: a notification's object whose keys
// two secrets name (or a secret and the key "xxxxx") lost one value to
// the masking, both keys becoming "xxxxx"; every value is kept now.
func TestNotificationKeysStayDistinct(t *testing.T) {
	t.Parallel()
	a, b := "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "sk-proj-Zq81mWv0Lp3TnRx7"
	p := &Pool{shown: append(redact.Forms(a), redact.Forms(b)...)}
	n := mcp.JSONRPCNotification{}
	n.Params.AdditionalFields = map[string]any{"data": map[string]any{a: "one", b: "two", "xxxxx": "three", "xxxxx#2": "four"}}
	got, _ := p.maskNotification(n).Params.AdditionalFields["data"].(map[string]any)
	want := map[string]any{"xxxxx": "three", "xxxxx#2": "four", "xxxxx#3": "one", "xxxxx#4": "two"}
	if len(got) != len(want) {
		t.Fatalf("masked %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("masked %v, want %v", got, want)
			break
		}
	}
}

// tokenSchema is token_checked's outputSchema: a GitHub token, by its
// pattern, that "xxxxx" does not match.
const tokenSchema = `{"type":"object","properties":{"token":{"type":"string","pattern":"^ghp_[A-Za-z0-9]{36}$","minLength":40}},"required":["token"]}`

// TestCheckedBeforeMasking: the masked answer of a server whose tool
// sends its token as its outputSchema describes it ({"token": "ghp_…"},
// a pattern and a minLength) is {"token": "xxxxx"}, which fails that
// schema: checked after CallTool, the server's conforming answer was
// taken for a violation. CallToolChecked runs the check on the answer
// as sent, then masks what the check returns, the violation's message
// quoting the value included.
func TestCheckedBeforeMasking(t *testing.T) {
	t.Parallel()
	v, tok := tokenView(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pattern := regexp.MustCompile(`^ghp_[A-Za-z0-9]{36}$`)
	// check is what a client checking the outputSchema's "token" does.
	check := func(r Result) Result {
		var out struct{ Token string }
		if err := json.Unmarshal(r.Structured, &out); err != nil || !pattern.MatchString(out.Token) {
			return Result{Text: fmt.Sprintf("does not match the outputSchema: token %q", out.Token), IsError: true}
		}
		return r
	}
	plain, err := v.CallTool(ctx, "token_checked", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(plain.Structured) != `{"token":"xxxxx"}` || !check(plain).IsError {
		t.Fatalf("CallTool: %s; the masked answer should fail the schema (what this test is about)", plain.Structured)
	}
	res, err := v.CallToolChecked(ctx, "token_checked", json.RawMessage(`{}`), check)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || string(res.Structured) != `{"token":"xxxxx"}` || res.Text != "the token is xxxxx" {
		t.Errorf("CallToolChecked: %+v, want the answer passing its check, masked", res)
	}
	quoting := func(r Result) Result {
		return Result{Text: fmt.Sprintf("token %q does not match %s", tok, tokenSchema), IsError: true}
	}
	res, err = v.CallToolChecked(ctx, "token_checked", json.RawMessage(`{}`), quoting)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Text, tok) || !strings.Contains(res.Text, `token "xxxxx" does not match`) {
		t.Errorf("a check's violation quoting the token: %q, want it masked", res.Text)
	}
}

// TestSplitSecretMasked: a server whose answer cuts its token in two
// content blocks ("token: ghp_16C7e42F292c6" and "912E7…B4a (end)")
// showed both parts, joined by a newline, which the masking of whole
// values does not find. Both parts are masked now.
func TestSplitSecretMasked(t *testing.T) {
	t.Parallel()
	v, _ := tokenView(t)
	if res := call(t, v, "token_split", map[string]any{}); res.Text != "token: xxxxx\nxxxxx (end)" {
		t.Errorf("token cut in two blocks: %q, want %q", res.Text, "token: xxxxx\nxxxxx (end)")
	}
}

// TestEscapedSecretMasked: a server whose structured content writes its
// token's letters as \u escapes ("\u0067\u0068\u0070…", which no encoder
// writes for ASCII and no Form matches) showed it, in the structured
// content and in the text made of it, to anything that decodes it.
func TestEscapedSecretMasked(t *testing.T) {
	t.Parallel()
	v, _ := tokenView(t)
	res := call(t, v, "token_escaped", map[string]any{})
	if string(res.Structured) != `{"token":"xxxxx"}` || res.Text != `{"token":"xxxxx"}` {
		t.Errorf("escaped token: structured %s, text %q; want it masked", res.Structured, res.Text)
	}
}

// TestMaskSecrets: View.MaskSecrets masks the credentials of the pool's
// servers' configs in any text (what agentloop shows of a recovered
// panic); before it existed, the loop had nothing to mask a panic's value
// with and showed it as it was.
func TestMaskSecrets(t *testing.T) {
	t.Parallel()
	v, tok := tokenView(t)
	in := "runtime error: request https://api.example.com/?t=" + tok + " failed"
	if got, want := v.MaskSecrets(in), "runtime error: request https://api.example.com/?t=xxxxx failed"; got != want {
		t.Errorf("MaskSecrets(%q) = %q, want %q", in, got, want)
	}
}

// tokenView is a view of the "secrets" stdio test server configured with
// echoedEnv's GITHUB_TOKEN in its env, and that token.
func tokenView(t *testing.T) (*View, string) {
	t.Helper()
	sc := stdioTestServer("secrets")
	tok := echoedEnv["GITHUB_TOKEN"]
	sc.Env["GITHUB_TOKEN"] = tok
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": sc}})
	return newTestView(t, p, nil, nil, nil), tok
}
