package codemode

import (
	"context"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

func TestIdent(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"logging_getLogs", "logging_getLogs"},
		{"github-get_issue", "github_get_issue"},
		{"files.read", "files_read"},
		{"a/b:c d", "a_b_c_d"},
		{"$ref", "$ref"},
		{"2fa-check", "_2fa_check"},
		{"delete", "delete"},
		{"café", "caf_"},
		{"", "_"},
		{"__codemode_guard__", "t__codemode_guard__"},
	}
	for _, tt := range tests {
		if got := Ident(tt.name); got != tt.want {
			t.Errorf("Ident(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestCatalogCollisions(t *testing.T) {
	t.Parallel()
	tools := []Tool{{Name: "a-b"}, {Name: "a_b"}, {Name: "a.b"}, {Name: "a_b_2"}, {Name: "x y"}, {Name: "x-y"}, {Name: "a-b"}}
	want := map[string]string{
		"a_b":   "a_b",   // already an identifier: kept
		"a_b_2": "a_b_2", // already an identifier: kept
		"a-b":   "a_b_3", // "a-b" < "a.b": first free suffix
		"a.b":   "a_b_4",
		"x y":   "x_y",
		"x-y":   "x_y_2",
	}
	for round := 0; round < 20; round++ {
		shuffled := append([]Tool(nil), tools...)
		rand.New(rand.NewSource(int64(round))).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		c := NewCatalog(shuffled)
		if len(c.Tools()) != 6 {
			t.Fatalf("%d tools, want 6 (one duplicate)", len(c.Tools()))
		}
		for name, id := range want {
			got, ok := c.Ident(name)
			if !ok || got != id {
				t.Errorf("round %d: Ident(%q) = %q, %v; want %q", round, name, got, ok, id)
			}
			if back, ok := c.Name(id); !ok || back != name {
				t.Errorf("round %d: Name(%q) = %q, %v; want %q", round, id, back, ok, name)
			}
		}
	}
	if _, ok := NewCatalog(tools).Ident("nope"); ok {
		t.Error("Ident of an unknown tool")
	}
}

// The code calls a tool by its identifier; the Host gets its name.
func TestCollidingToolsAreCalledByName(t *testing.T) {
	t.Parallel()
	c := NewCatalog([]Tool{{Name: "a-b"}, {Name: "a.b"}})
	h := &fakeHost{tools: map[string]func(map[string]any) (Result, error){
		"a-b": func(map[string]any) (Result, error) { return Result{Text: "dash"}, nil },
		"a.b": func(map[string]any) (Result, error) { return Result{Text: "dot"}, nil },
	}}
	out := c.Run(context.Background(), `[await tools.a_b(), await tools.a_b_2(), Object.keys(tools)]`, h, Limits{})
	if out.Err != nil || out.Text != `["dash","dot",["a_b","a_b_2"]]` {
		t.Errorf("Text = %q, Err = %v", out.Text, out.Err)
	}
}

func indexTools() []Tool {
	return []Tool{
		{Name: "tickets-create", Description: "Create a ticket. It gets an id.", InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"},"labels":{"type":"array"}},"required":["title"]}`)},
		{Name: "logging_getLogs", Description: "Read log lines\nfrom the log store.", InputSchema: json.RawMessage(`{"type":"object","properties":{"level":{"enum":["error"]},"since":{"type":"string"}}}`)},
		{Name: "ping", Description: "  Ping   the   server  "},
		{Name: "wide", Description: strings.Repeat("word ", 60), InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{},"h":{},"i":{},"j":{}},"required":["j"]}`)},
	}
}

func TestIndex(t *testing.T) {
	t.Parallel()
	want := "logging_getLogs({level?, since?}): Read log lines\n" +
		"ping(): Ping the server\n" +
		"tickets_create({title, body?, labels?}): Create a ticket.\n" +
		"wide({a?, b?, c?, d?, e?, f?, g?, h?, …2 more}): " + strings.Repeat("word ", 23) + "wo…"
	got := NewCatalog(indexTools()).Index(0)
	if got != want {
		t.Errorf("Index =\n%s\nwant\n%s", got, want)
	}
	// Byte-identical whatever the order of the tools.
	for round := 0; round < 10; round++ {
		tools := indexTools()
		rand.New(rand.NewSource(int64(round))).Shuffle(len(tools), func(i, j int) { tools[i], tools[j] = tools[j], tools[i] })
		if again := NewCatalog(tools).Index(0); again != want {
			t.Fatalf("round %d: Index differs:\n%s", round, again)
		}
	}
}

func TestIndexCut(t *testing.T) {
	t.Parallel()
	c := NewCatalog(indexTools())
	full := c.Index(0)
	lines := strings.Split(full, "\n")
	tests := []struct {
		max  int
		want string
	}{
		{max: len(full), want: full},
		{max: len(full) + 100, want: full},
		{max: len(full) - 1, want: lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n[index cut: 1 of 4 tools not listed]"},
		{max: len(lines[0]) + 1 + len("[index cut: 3 of 4 tools not listed]"), want: lines[0] + "\n[index cut: 3 of 4 tools not listed]"},
		{max: 10, want: "[index cut: 4 of 4 tools not listed]"},
	}
	for _, tt := range tests {
		got := c.Index(tt.max)
		if got != tt.want {
			t.Errorf("Index(%d) =\n%s\nwant\n%s", tt.max, got, tt.want)
		}
		if len(got) > tt.max && tt.max >= len("[index cut: 4 of 4 tools not listed]") {
			t.Errorf("Index(%d) is %d bytes", tt.max, len(got))
		}
		if c.Index(tt.max) != got {
			t.Errorf("Index(%d) is not deterministic", tt.max)
		}
	}
}
