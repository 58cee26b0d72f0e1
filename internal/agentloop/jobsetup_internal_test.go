package agentloop

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// scaledPool is a pool whose one in-process mcp-go server offers n tools:
// the shared catalogs' tools in order, then copies with _r2, _r3, ...
// suffixes (as cmd/bench's search rows).
func scaledPool(tb testing.TB, n int) *toolcache.Pool {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "catalogs", "*.json"))
	var all []toolcache.Tool
	for _, f := range files {
		_, tools, err := toolcache.LoadCatalog(f)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, tools...)
	}
	if len(all) == 0 {
		tb.Skip("no shared catalogs")
	}
	s := server.NewMCPServer("catalog", "1.0.0", server.WithToolCapabilities(false))
	seen := map[string]bool{}
	ok := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	var tools []server.ServerTool
	for copyN := 1; len(tools) < n; copyN++ {
		for _, t := range all {
			name := t.Original
			if copyN > 1 {
				name += "_r" + strconv.Itoa(copyN)
			}
			if len(tools) == n || seen[name] {
				continue
			}
			seen[name] = true
			schema := t.InputSchema
			if len(schema) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			tools = append(tools, server.ServerTool{Tool: mcp.NewToolWithRawSchema(name, t.Description, schema), Handler: ok})
		}
	}
	s.AddTools(tools...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := toolcache.NewPool(ctx, toolcache.Config{},
		toolcache.WithInProcessServer("catalog", s, toolcache.ServerConfig{}),
		toolcache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	if got := p.Registry().Count(); got != n {
		tb.Fatalf("pool lists %d tools, want %d", got, n)
	}
	return p
}

type noModel struct{}

func (noModel) Complete(context.Context, llm.Request) (llm.Response, error) {
	return llm.Response{}, fmt.Errorf("not called")
}

// setupJob is what a job start costs the loop: the job's view of the pool
// (as agentrun makes one per job) and Loop.newJob (catalog, registry,
// tools array, token counts).
func setupJob(tb testing.TB, l *Loop, p *toolcache.Pool, mode Mode) (*job, *toolcache.View) {
	v, err := p.View("job", nil, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	j, err := l.newJob(context.Background(), Input{JobID: "job", Task: "What is 1 + 2?", Tools: v, Mode: mode})
	if err != nil {
		tb.Fatal(err)
	}
	return j, v
}

// BenchmarkJobSetup measures a job's start on catalogs of 1,000 and 10,000
// tools in search and deferred mode, after a first job on the catalog
// (the steady state: the catalog changes rarely). held-KB/job is the live
// heap 100 such jobs hold, per job, while they are in flight.
func BenchmarkJobSetup(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		p := scaledPool(b, n)
		l, err := New(Config{LLM: noModel{}})
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []Mode{ModeSearch, ModeDeferred} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				j, v := setupJob(b, l, p, mode) // the first job on the catalog
				_ = v.Close()
				if j.mode != mode {
					b.Fatalf("mode %s", j.mode)
				}
				b.ReportAllocs()
				for b.Loop() {
					_, v := setupJob(b, l, p, mode)
					_ = v.Close()
				}
				b.StopTimer()
				const held = 100
				before := liveHeap()
				jobs := make([]*job, held)
				views := make([]*toolcache.View, held)
				for i := range held {
					jobs[i], views[i] = setupJob(b, l, p, mode)
				}
				after := liveHeap()
				runtime.KeepAlive(jobs)
				for _, v := range views {
					_ = v.Close()
				}
				b.ReportMetric((float64(after)-float64(before))/held/1024, "held-KB/job")
			})
		}
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// versionedTools is a ToolSet naming its catalog version, counting how
// often its tools are listed.
type versionedTools struct {
	version uint64
	tools   []toolcache.Tool
	listed  int
}

func (v *versionedTools) CatalogKey() (uint64, string) { return v.version, "all" }
func (v *versionedTools) Tools() []toolcache.Tool      { v.listed++; return v.tools }
func (v *versionedTools) CallTool(context.Context, string, json.RawMessage) (toolcache.Result, error) {
	return toolcache.Result{}, fmt.Errorf("not called")
}
func (v *versionedTools) ListResources(context.Context) ([]toolcache.Resource, error) {
	return nil, nil
}
func (v *versionedTools) ReadResource(context.Context, string) (string, error) { return "", nil }

func toolOf(name string) toolcache.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	return toolcache.Tool{Name: name, Original: name, Server: "s", Description: "Tool " + name + ".", InputSchema: schema, Parameters: schema}
}

// TestCatalogSharedPerVersion: jobs on one catalog version share its
// catalog (listed once, the same entries and tools arrays); a new version
// is listed again; client tools make a catalog of their own, and each job
// still reports its own clash.
func TestCatalogSharedPerVersion(t *testing.T) {
	t.Parallel()
	l, err := New(Config{LLM: noModel{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &versionedTools{version: 1, tools: []toolcache.Tool{toolOf("a"), toolOf("b")}}
	start := func(in Input) *job {
		t.Helper()
		in.Task, in.Tools = "x", ts
		j, err := l.newJob(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	j1, j2 := start(Input{Mode: ModeFull}), start(Input{Mode: ModeFull})
	if ts.listed != 1 {
		t.Errorf("listed %d times for two jobs on one version", ts.listed)
	}
	if j1.reg.byName["a"] != j2.reg.byName["a"] || &j1.tools[0] != &j2.tools[0] || j1.toolToks != j2.toolToks || j1.toolToks == 0 {
		t.Error("jobs on one version do not share entries and tools arrays")
	}
	if e := j1.reg.byName["a"]; len(e.validate(json.RawMessage(`{}`))) == 0 || len(j2.reg.byName["a"].validate(json.RawMessage(`{"a":1}`))) != 0 {
		t.Error("shared validator does not validate")
	}
	js := start(Input{Mode: ModeSearch})
	if _, meta := js.reg.lookup(ToolSearchTools); ts.listed != 1 || js.reg.byName["a"] != j1.reg.byName["a"] || js.fullToks != j1.toolToks || !meta {
		t.Errorf("search-mode job: listed %d, full tokens %d (full mode sent %d)", ts.listed, js.fullToks, j1.toolToks)
	}

	ts.version, ts.tools = 2, append(ts.tools, toolOf("c"))
	j3 := start(Input{Mode: ModeFull})
	if ts.listed != 2 || len(j3.reg.catalog) != 3 || j3.reg.byName["a"] == j1.reg.byName["a"] {
		t.Errorf("new version: listed %d times, %d tools", ts.listed, len(j3.reg.catalog))
	}

	var evs []Event
	sink := SinkFunc(func(_ context.Context, e Event) { evs = append(evs, e) })
	caller := func(context.Context, string, json.RawMessage) (string, error) { return "", nil }
	decls := []clienttools.Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "mine", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	k1 := start(Input{Mode: ModeFull, ClientTools: decls, ClientCaller: caller, Sink: sink})
	k2 := start(Input{Mode: ModeFull, ClientTools: decls, ClientCaller: caller, Sink: sink})
	if ts.listed != 3 || k1.reg.byName["mine"] == nil || k1.reg.byName["mine"] != k2.reg.byName["mine"] || j3.reg.byName["mine"] != nil {
		t.Errorf("client tools: listed %d times; shared %v", ts.listed, k1.reg.byName["mine"] == k2.reg.byName["mine"])
	}
	clashes := 0
	for _, e := range evs {
		if e.Type == EventToolClash {
			clashes++
		}
	}
	if clashes != 2 {
		t.Errorf("%d clash events for two jobs, want one each", clashes)
	}
}

// TestCatalogPerSelection: views of one pool with other allow/deny globs
// get their own catalogs, of their own tools.
func TestCatalogPerSelection(t *testing.T) {
	t.Parallel()
	p := scaledPool(t, 60)
	l, err := New(Config{LLM: noModel{}})
	if err != nil {
		t.Fatal(err)
	}
	all, v1 := setupJob(t, l, p, ModeFull)
	defer v1.Close()
	same, v2 := setupJob(t, l, p, ModeFull)
	defer v2.Close()
	name := all.reg.catalog[0].Name
	v3, err := p.View("job3", nil, []string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v3.Close()
	one, err := l.newJob(context.Background(), Input{Task: "x", Tools: v3, Mode: ModeFull})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.reg.catalog) != 60 || all.reg.byName[name] != same.reg.byName[name] {
		t.Errorf("unfiltered views: %d tools, shared %v", len(all.reg.catalog), all.reg.byName[name] == same.reg.byName[name])
	}
	if len(one.reg.catalog) != 1 || one.reg.catalog[0].Name != name || len(one.tools) != 1 || one.reg.byName[name] == all.reg.byName[name] {
		t.Errorf("allow %q: %d tools, %d sent", name, len(one.reg.catalog), len(one.tools))
	}
}
