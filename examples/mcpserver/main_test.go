package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/goleak"
)

// runMainEnv makes the test binary act as the server, so the stdio tests
// spawn a real process without a separate go build.
const runMainEnv = "MCPSERVER_TEST_RUN_MAIN"

// wait bounds every wait for an event in these tests.
const wait = 10 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// startStdio spawns the server over stdio and initializes a session. The
// notifications it receives go to the returned channel.
func startStdio(t *testing.T) (*client.Client, <-chan mcp.JSONRPCNotification) {
	t.Helper()
	// GORACE: a -race binary otherwise sleeps 1 s on exit, and Close waits for it.
	c, err := client.NewStdioMCPClient(os.Args[0], []string{runMainEnv + "=1", "GORACE=atexit_sleep_ms=0"})
	if err != nil {
		t.Fatalf("spawn server: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, initialize(t, c)
}

func initialize(t *testing.T, c *client.Client) <-chan mcp.JSONRPCNotification {
	t.Helper()
	notes := make(chan mcp.JSONRPCNotification, 16)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case notes <- n:
		default: // a test that ignores notifications must not block the client
		}
	})
	// The SSE client's stream lives as long as Start's context.
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "mcpserver-test", Version: "0"}
	// 2025-11-25 keeps list_changed on the session and skips the discover probe.
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if res.ServerInfo.Name != serverName {
		t.Fatalf("server name %q, want %q", res.ServerInfo.Name, serverName)
	}
	if res.Capabilities.Tools == nil || !res.Capabilities.Tools.ListChanged {
		t.Fatalf("tools capability %+v, want listChanged", res.Capabilities.Tools)
	}
	return notes
}

func call(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestStdioToolCalls(t *testing.T) {
	t.Parallel()
	c, _ := startStdio(t)
	tests := []struct {
		name    string
		tool    string
		args    map[string]any
		want    string // substring of the text result
		wantErr bool   // a tool error (isError), not a protocol error
	}{
		{name: "add", tool: "add", args: map[string]any{"a": 2, "b": 40.5}, want: "42.5"},
		{name: "add missing b", tool: "add", args: map[string]any{"a": 2}, wantErr: true},
		{name: "add wrong type", tool: "add", args: map[string]any{"a": "two", "b": 1}, wantErr: true},
		{name: "weather celsius", tool: "get_weather", args: map[string]any{"city": "Lisbon"},
			want: textOf(fakeWeather("Lisbon", "celsius"))},
		{name: "weather fahrenheit", tool: "get_weather", args: map[string]any{"city": "Lisbon", "unit": "fahrenheit"},
			want: textOf(fakeWeather("Lisbon", "fahrenheit"))},
		{name: "weather bad unit", tool: "get_weather", args: map[string]any{"city": "Lisbon", "unit": "kelvin"}, wantErr: true},
		{name: "slow zero", tool: "slow", args: map[string]any{"ms": 0}, want: "slept 0 ms"},
		{name: "slow negative", tool: "slow", args: map[string]any{"ms": -1}, wantErr: true},
		{name: "search empty notebook", tool: "search_notes", args: map[string]any{"query": "zzz-none"}, want: "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			res := call(t, ctx, c, tt.tool, tt.args)
			if res.IsError != tt.wantErr {
				t.Fatalf("isError = %v, want %v; result %q", res.IsError, tt.wantErr, text(res))
			}
			if !strings.Contains(text(res), tt.want) {
				t.Fatalf("result %q, want it to contain %q", text(res), tt.want)
			}
		})
	}
}

func textOf(w weather) string {
	res, _ := getWeather(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{
		Arguments: map[string]any{"city": w.City, "unit": w.Unit}}})
	return text(res)
}

func TestFakeWeatherIsDeterministic(t *testing.T) {
	t.Parallel()
	for _, city := range []string{"Lisbon", "Tokyo", "Reykjavik", ""} {
		c, f := fakeWeather(city, "celsius"), fakeWeather(" "+strings.ToUpper(city), "fahrenheit")
		if c.Temperature*9/5+32 != f.Temperature || c.Conditions != f.Conditions || c.Humidity != f.Humidity {
			t.Errorf("%q: celsius %+v and fahrenheit %+v disagree", city, c, f)
		}
		if c.Temperature < -5 || c.Temperature > 34 || c.Humidity < 30 || c.Humidity >= 90 {
			t.Errorf("%q: implausible %+v", city, c)
		}
	}
}

func TestStdioSchemas(t *testing.T) {
	t.Parallel()
	c, _ := startStdio(t)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// Compare as JSON, the way a client sees the schemas.
	schemas := map[string]map[string]any{}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		data, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		schemas[tool.Name] = m
	}
	slices.Sort(names)
	if want := []string{"add", "create_note", "get_weather", "search_notes", "slow"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v (delete_note only once a note exists)", names, want)
	}
	tests := []struct {
		name string
		path []string // into the tool's JSON
		want string   // JSON of the value found
	}{
		{"add required", []string{"add", "inputSchema", "required"}, `["a","b"]`},
		{"add a type", []string{"add", "inputSchema", "properties", "a", "type"}, `"number"`},
		{"weather unit enum", []string{"get_weather", "inputSchema", "properties", "unit", "enum"}, `["celsius","fahrenheit"]`},
		{"weather required", []string{"get_weather", "inputSchema", "required"}, `["city"]`},
		{"weather output schema", []string{"get_weather", "outputSchema", "properties", "temperature", "type"}, `"number"`},
		{"weather read-only", []string{"get_weather", "annotations", "readOnlyHint"}, `true`},
		{"search nested enum", []string{"search_notes", "inputSchema", "properties", "filter", "properties", "match", "enum"}, `["any","all"]`},
		{"search nested array", []string{"search_notes", "inputSchema", "properties", "filter", "properties", "tags", "items", "type"}, `"string"`},
		{"search limit max", []string{"search_notes", "inputSchema", "properties", "limit", "maximum"}, `50`},
		{"note tags items", []string{"create_note", "inputSchema", "properties", "tags", "items", "type"}, `"string"`},
		{"note required", []string{"create_note", "inputSchema", "required"}, `["title","body"]`},
		{"slow integer", []string{"slow", "inputSchema", "properties", "ms", "type"}, `"integer"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v any = schemas[tt.path[0]]
			for _, key := range tt.path[1:] {
				m, ok := v.(map[string]any)
				if !ok {
					t.Fatalf("%v: no object at %q", tt.path, key)
				}
				v = m[key]
			}
			got, _ := json.Marshal(v)
			if string(got) != tt.want {
				t.Fatalf("%v = %s, want %s", tt.path, got, tt.want)
			}
		})
	}
}

// waitListChanged waits for notifications/tools/list_changed.
func waitListChanged(t *testing.T, notes <-chan mcp.JSONRPCNotification) {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case n := <-notes:
			if n.Method == string(mcp.MethodNotificationToolsListChanged) {
				return
			}
		case <-timeout:
			t.Fatal("no notifications/tools/list_changed")
		}
	}
}

func hasTool(t *testing.T, ctx context.Context, c *client.Client, name string) bool {
	t.Helper()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(list.Tools, func(tool mcp.Tool) bool { return tool.Name == name })
}

func TestStdioNotesListChanged(t *testing.T) {
	t.Parallel()
	c, notes := startStdio(t)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()

	var created note
	res := call(t, ctx, c, "create_note", map[string]any{"title": "Groceries", "body": "milk, eggs", "tags": []string{"home", "todo"}})
	if err := json.Unmarshal([]byte(text(res)), &created); err != nil || created.ID == "" {
		t.Fatalf("create_note result %q: %v", text(res), err)
	}
	waitListChanged(t, notes)
	if !hasTool(t, ctx, c, "delete_note") {
		t.Fatal("delete_note not listed after the first note")
	}
	call(t, ctx, c, "create_note", map[string]any{"title": "Deploy", "body": "ship jetagent", "tags": []string{"work", "todo"}})

	searches := []struct {
		args map[string]any
		want []string // titles
	}{
		{map[string]any{"query": "MILK"}, []string{"Groceries"}},
		{map[string]any{"query": ""}, []string{"Groceries", "Deploy"}},
		{map[string]any{"query": "", "limit": 1}, []string{"Groceries"}},
		{map[string]any{"query": "", "filter": map[string]any{"tags": []string{"work", "home"}}}, []string{"Groceries", "Deploy"}},
		{map[string]any{"query": "", "filter": map[string]any{"tags": []string{"work", "todo"}, "match": "all"}}, []string{"Deploy"}},
	}
	for _, s := range searches {
		var found []note
		if err := json.Unmarshal([]byte(text(call(t, ctx, c, "search_notes", s.args))), &found); err != nil {
			t.Fatal(err)
		}
		var titles []string
		for _, n := range found {
			titles = append(titles, n.Title)
		}
		if !slices.Equal(titles, s.want) {
			t.Errorf("search %v = %v, want %v", s.args, titles, s.want)
		}
	}

	read, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: indexURI}})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].(mcp.TextResourceContents).Text, "ship jetagent") {
		t.Fatalf("notes index %+v lacks the second note", read.Contents)
	}

	for _, n := range []string{created.ID, "n2"} {
		if res := call(t, ctx, c, "delete_note", map[string]any{"id": n}); res.IsError {
			t.Fatalf("delete %s: %s", n, text(res))
		}
	}
	waitListChanged(t, notes) // the last note is gone, and with it delete_note
	if hasTool(t, ctx, c, "delete_note") {
		t.Fatal("delete_note still listed with no notes")
	}
}

func TestSlowHonoursCancellation(t *testing.T) {
	t.Parallel()
	// In-process: the handler returns as soon as its context ends.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := slow(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Arguments: map[string]any{"ms": maxSlow}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("slow with a cancelled context: %v, want context.Canceled", err)
	}

	// Over stdio: a cancelled call returns, and the session stays usable.
	c, _ := startStdio(t)
	callCtx, cancelCall := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelCall()
	req := mcp.CallToolRequest{}
	req.Params.Name = "slow"
	req.Params.Arguments = map[string]any{"ms": maxSlow}
	if _, err := c.CallTool(callCtx, req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call past its deadline: %v, want context.DeadlineExceeded", err)
	}
	next, cancelNext := context.WithTimeout(t.Context(), wait)
	defer cancelNext()
	if got := text(call(t, next, c, "add", map[string]any{"a": 1, "b": 1})); got != "2" {
		t.Fatalf("add after a cancelled call = %q", got)
	}
}

// TestHTTPTransports runs the server's -http and -sse modes in process and
// calls a tool through the matching mcp-go client.
func TestHTTPTransports(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flag    string
		connect func(url string, hc *http.Client) (*client.Client, error)
	}{
		{"-http", func(url string, hc *http.Client) (*client.Client, error) {
			return client.NewStreamableHttpClient(url, transport.WithHTTPBasicClient(hc))
		}},
		{"-sse", func(url string, hc *http.Client) (*client.Client, error) {
			return client.NewSSEMCPClient(url, client.WithHTTPClient(hc))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			t.Parallel()
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				err := run(ctx, []string{tt.flag, "127.0.0.1:0"}, nil, io.Discard, pw)
				pw.Close()
				done <- err
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			if err != nil {
				t.Fatalf("reading the listen line: %v", err)
			}
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			url, ok := strings.CutPrefix(strings.TrimSpace(line), "mcpserver: listening on ")
			if !ok {
				t.Fatalf("listen line %q", line)
			}

			// An own transport, so its idle connections can be closed for goleak.
			hc := &http.Client{Transport: &http.Transport{}}
			c, err := tt.connect(url, hc)
			if err != nil {
				t.Fatal(err)
			}
			initialize(t, c)
			callCtx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			if got := text(call(t, callCtx, c, "add", map[string]any{"a": 20, "b": 22})); got != "42" {
				t.Fatalf("add = %q, want 42", got)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("close client: %v", err)
			}
			hc.CloseIdleConnections()

			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("run: %v", err)
				}
			case <-time.After(wait):
				t.Fatal("server did not shut down")
			}
		})
	}
}
