package agentloop_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

func ExampleBuildTools() {
	tools := []toolcache.Tool{{
		Name:        "get_weather",
		Description: "Get the weather for a city. Uses a forecast service.\nMore details.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}}
	for _, mode := range []agentloop.Mode{agentloop.ModeFull, agentloop.ModeDeferred, agentloop.ModeSearch} {
		defs, _ := agentloop.BuildTools(mode, tools)
		for _, d := range defs {
			fmt.Printf("%s: %s %q %s\n", mode, d.Name, agentloop.OneLine(d.Description), d.Parameters)
		}
	}
	// Output:
	// full: get_weather "Get the weather for a city." {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}
	// deferred: get_weather "Get the weather for a city." {"type":"object"}
	// search: search_tools "Find tools for a request (keywords or the request itself)." {"type":"object","properties":{"query":{"type":"string"},"server":{"type":"string","description":"only this server's tools"},"limit":{"type":"integer","minimum":1,"maximum":50,"description":"default 10"}},"required":["query"],"additionalProperties":false}
	// search: get_tool_details "Get a tool's full description and input JSON Schema, when its search_tools signature is not enough." {"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}
	// search: call_tool "Call a tool by name with arguments matching its signature or input schema; invalid arguments are answered with the full schema." {"type":"object","properties":{"name":{"type":"string"},"arguments":{"type":"object"}},"required":["name","arguments"],"additionalProperties":false}
}

func TestBuildToolsNeverNull(t *testing.T) {
	t.Parallel()
	tools := []toolcache.Tool{
		{Name: "a", InputSchema: json.RawMessage(`null`)},
		{Name: "b"},
		{Name: "c", Parameters: json.RawMessage(` null `), InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{}}}`)},
	}
	for _, mode := range []agentloop.Mode{agentloop.ModeFull, agentloop.ModeDeferred, agentloop.ModeSearch} {
		defs, err := agentloop.BuildTools(mode, tools)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range defs {
			if p := strings.TrimSpace(string(d.Parameters)); p == "" || p == "null" {
				t.Errorf("%s: %s has parameters %q", mode, d.Name, p)
			}
		}
	}
	full, _ := agentloop.BuildTools(agentloop.ModeFull, tools)
	if string(full[2].Parameters) != `{"type":"object","properties":{"x":{}}}` {
		t.Errorf("full c = %s", full[2].Parameters)
	}
	if code, err := agentloop.BuildTools(agentloop.ModeCode, tools); err != nil || len(code) != 3 || code[0].Name != agentloop.ToolExecuteCode {
		t.Errorf("code mode: %v %v", code, err)
	}
	if _, err := agentloop.BuildTools("bogus", tools); !errors.Is(err, agentloop.ErrConfig) {
		t.Errorf("bogus mode: %v", err)
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                 "",
		"\n\n  Lists files.  \nMore.":      "Lists files.",
		"Search, e.g. by name. Then more.": "Search, e.g. by name.",
		"Version 1.2 of the tool":          "Version 1.2 of the tool",
		strings.Repeat("é", 100):           strings.Repeat("é", 78) + "…",
		"Read a file. Supports: text, binary, ...": "Read a file.",
	} {
		if got := agentloop.OneLine(in); got != want {
			t.Errorf("OneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	newLoop(t, s, agentloop.Config{}) // a valid one
	for name, cfg := range map[string]agentloop.Config{
		"no llm":          {},
		"bad mode":        {DefaultMode: "fast"},
		"negative":        {MaxParallelCalls: -1},
		"rounds over cap": {MaxRoundsCap: 5, DefaultMaxRounds: 6},
		"thresholds":      {AutoThresholds: agentloop.AutoThresholds{DeferredAbove: 10, SearchAbove: 5}},
		"tiny output":     {MaxToolOutput: 10},
	} {
		if name != "no llm" {
			cfg.LLM = completerFunc(nil)
		}
		if _, err := agentloop.New(cfg); !errors.Is(err, agentloop.ErrConfig) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// A cap below the default number of rounds, with no default set, lowers
// the default instead of failing (zero means "the default").
func TestCapBelowDefaultRounds(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t)
	s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
		if r.ToolsJSON == nil {
			return textReply("final")
		}
		return toolReply(call("echo", `{"text":"x"}`))
	})
	l := newLoop(t, s, agentloop.Config{MaxRoundsCap: 3})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rounds != 3 || res.StopReason != agentloop.StopMaxRounds {
		t.Errorf("rounds %d, stop %s", res.Rounds, res.StopReason)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	l := newLoop(t, s, agentloop.Config{})
	for name, tc := range map[string]struct {
		in   agentloop.Input
		want error
	}{
		"empty task":      {agentloop.Input{}, agentloop.ErrConfig},
		"bad mode":        {agentloop.Input{Task: "x", Mode: "turbo"}, agentloop.ErrConfig},
		"no caller":       {agentloop.Input{Task: "x", ClientTools: []clienttools.Decl{{Name: "a"}}}, agentloop.ErrConfig},
		"bad client name": {agentloop.Input{Task: "x", ClientTools: []clienttools.Decl{{Name: "a b"}}, ClientCaller: noCaller}, agentloop.ErrConfig},
		"empty resume":    {agentloop.Input{Resume: &agentloop.Checkpoint{}}, agentloop.ErrConfig},
	} {
		res, err := l.Run(t.Context(), tc.in)
		if !errors.Is(err, tc.want) || res == nil || res.StopReason != agentloop.StopError {
			t.Errorf("%s: err = %v, res = %+v", name, err, res)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests sent for invalid input", n)
	}
}

// TestCatalogTokens reports each mode's tools-array tokens for the shared
// real catalogs (when present next to the repository).
func TestCatalogTokens(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../../shared/catalogs/*.json")
	if len(files) == 0 {
		t.Skip("no ../shared/catalogs")
	}
	var search0 int
	for _, f := range files {
		_, tools, err := toolcache.LoadCatalog(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var counts []int
		for _, mode := range []agentloop.Mode{agentloop.ModeFull, agentloop.ModeDeferred, agentloop.ModeSearch} {
			defs, err := agentloop.BuildTools(mode, tools)
			if err != nil {
				t.Fatal(err)
			}
			n, err := agentloop.ToolTokens(defs)
			if err != nil {
				t.Fatal(err)
			}
			counts = append(counts, n)
		}
		if counts[1] >= counts[0] {
			t.Errorf("%s: deferred %d >= full %d", filepath.Base(f), counts[1], counts[0])
		}
		if search0 == 0 {
			search0 = counts[2]
		} else if counts[2] != search0 {
			t.Errorf("%s: search tokens %d differ from %d", filepath.Base(f), counts[2], search0)
		}
		t.Logf("%-45s tools=%4d full=%7d deferred=%6d search=%4d", filepath.Base(f), len(tools), counts[0], counts[1], counts[2])
	}
}
