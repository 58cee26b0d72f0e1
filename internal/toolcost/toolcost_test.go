package toolcost_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/toolcache"
	"github.com/jetagent/jetagent/internal/toolcost"
)

func tool(name, desc, schema string) toolcache.Tool {
	return toolcache.Tool{Name: name, Original: name, Description: desc, InputSchema: json.RawMessage(schema), Parameters: json.RawMessage(schema)}
}

func TestMeasure(t *testing.T) {
	t.Parallel()
	big := `{"type":"object","properties":{"query":{"type":"string","description":"` + strings.Repeat("a long description of the query ", 40) + `"}},"required":["query"]}`
	tools := []toolcache.Tool{
		tool("search_issues", "Search issues. Returns a list of issues matching the query.", big),
		tool("get_issue", "Get one issue by number.", big),
	}
	row, err := toolcost.Measure("cat", tools, agentloop.DefaultAutoThresholds())
	if err != nil {
		t.Fatal(err)
	}
	if row.Tools != 2 {
		t.Errorf("Tools = %d, want 2", row.Tools)
	}
	if row.Deferred >= row.Full {
		t.Errorf("deferred %d not below full %d", row.Deferred, row.Full)
	}
	// search mode sends a fixed array: its cost does not depend on the catalog.
	empty, err := toolcost.Measure("empty", nil, agentloop.DefaultAutoThresholds())
	if err != nil {
		t.Fatal(err)
	}
	if row.Search != empty.Search || row.Search == 0 {
		t.Errorf("search cost %d (catalog) vs %d (empty): want equal and non-zero", row.Search, empty.Search)
	}
	// The figures are the loop's: the same as counting BuildTools directly.
	defs, err := agentloop.BuildTools(agentloop.ModeDeferred, tools)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := agentloop.ToolTokens(defs); n != row.Deferred {
		t.Errorf("deferred = %d, loop counts %d", row.Deferred, n)
	}
}

// TestSharedCatalogs measures the real catalogs when the shared folder is
// beside the checkout (it is, for developers and CI).
func TestSharedCatalogs(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../../shared/catalogs/*.json")
	if len(files) == 0 {
		t.Skip("no ../shared/catalogs beside the checkout")
	}
	var rows []toolcost.Row
	for _, f := range files {
		name, tools, err := toolcache.LoadCatalog(f)
		if err != nil {
			t.Fatal(err)
		}
		row, err := toolcost.Measure(name, tools, agentloop.DefaultAutoThresholds())
		if err != nil {
			t.Fatal(err)
		}
		if row.Tools > 3 && row.Deferred >= row.Full {
			t.Errorf("%s: deferred %d >= full %d", name, row.Deferred, row.Full)
		}
		rows = append(rows, row)
	}
	var b strings.Builder
	if err := toolcost.WriteText(&b, append(rows, toolcost.Total(rows))); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}

func ExampleWriteMarkdown() {
	rows := []toolcost.Row{{Name: "demo", Tools: 3, Full: 900, Deferred: 90, Search: 160, Code: 420, Auto: agentloop.ModeFull}}
	_ = toolcost.WriteMarkdown(os.Stdout, rows)
	// Output:
	// | catalog | tools | full | deferred | search | code | deferred/full | auto |
	// |---|---:|---:|---:|---:|---:|---:|---|
	// | demo | 3 | 900 | 90 | 160 | 420 | 10.0% | full |
}
