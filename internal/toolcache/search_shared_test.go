package toolcache

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

// Views of one pool search one index per catalog version; each view
// filters it by its servers and allow/deny globs.
func TestViewsShareIndex(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, Config{},
		WithInProcessServer("a", newTestMCPServer("a"), ServerConfig{}),
		WithInProcessServer("b", newTestMCPServer("b"), ServerConfig{}))
	tests := []struct {
		name         string
		servers      []string
		allow, deny  []string
		query        string
		wantServers  []string
		wantNoTool   string
		searchServer string
	}{
		{"all", nil, nil, nil, "echo text", []string{"a", "b"}, "", ""},
		{"one server", []string{"b"}, nil, nil, "echo text", []string{"b"}, "", ""},
		{"deny", nil, nil, []string{"echo", "*__echo"}, "echo text", nil, "echo", ""},
		{"server option", nil, nil, nil, "echo text", []string{"a"}, "", "a"},
	}
	ix := p.Registry().Index()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newTestView(t, p, tc.servers, tc.allow, tc.deny)
			res := v.SearchTools(tc.query, SearchOptions{Limit: 50, Server: tc.searchServer})
			if v.filterIx != ix {
				t.Errorf("the view searched another index than the pool's")
			}
			var servers []string
			for _, h := range res.Hits {
				if h.Tool.Original == "echo" && !slices.Contains(servers, h.Tool.Server) {
					servers = append(servers, h.Tool.Server)
				}
				if tc.wantNoTool != "" && h.Tool.Original == tc.wantNoTool {
					t.Errorf("denied %s found", h.Tool.Name)
				}
			}
			slices.Sort(servers)
			if !slices.Equal(servers, tc.wantServers) {
				t.Errorf("echo found on %v, want %v", servers, tc.wantServers)
			}
		})
	}
}

// A new catalog version gets a new index; the old one is not rebuilt.
func TestIndexPerVersion(t *testing.T) {
	t.Parallel()
	r := NewRegistry([]Tool{{Server: "s", Original: "one"}})
	a, b := r.Index(), r.Index()
	if a != b {
		t.Fatal("index rebuilt for the same version")
	}
	r.replace([]Tool{{Name: "two", Server: "s", Original: "two"}})
	c := r.Index()
	if c == a || c.Version() <= a.Version() || c.Len() != 1 || len(c.Search("two", SearchOptions{}).Hits) != 1 {
		t.Errorf("after a change: same index %v, versions %d -> %d", c == a, a.Version(), c.Version())
	}
}

// scaledCatalog assembles n tools from the shared catalogs: all of them,
// repeated with numbered copies of their servers as needed.
func scaledCatalog(tb testing.TB, n int) []Tool {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "catalogs", "*.json"))
	var all []Tool
	for _, f := range files {
		_, tools, err := LoadCatalog(f)
		if err != nil {
			tb.Fatal(err)
		}
		all = append(all, tools...)
	}
	if len(all) == 0 {
		tb.Skip("catalogs not available")
	}
	var out []Tool
	for copyN := 0; len(out) < n; copyN++ {
		for _, t := range all {
			if len(out) == n {
				break
			}
			if copyN > 0 {
				t.Server = fmt.Sprintf("%s-%d", t.Server, copyN)
			}
			out = append(out, t)
		}
	}
	return NewRegistry(out).List()
}

// BenchmarkSearchScale: index build time and memory, and the latency of
// whole-request queries (the development set's tasks), at 1,000 and
// 10,000 tools.
func BenchmarkSearchScale(b *testing.B) {
	items := loadDevSet(b)
	for _, n := range []int{1000, 10000} {
		tools := scaledCatalog(b, n)
		b.Run(fmt.Sprintf("build/%d", n), func(b *testing.B) {
			var heap float64
			for b.Loop() {
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				ix := NewSearchIndex(tools)
				runtime.GC()
				runtime.ReadMemStats(&m1)
				heap = float64(m1.HeapAlloc-m0.HeapAlloc) / (1 << 20)
				runtime.KeepAlive(ix)
			}
			b.ReportMetric(heap, "index-MB")
		})
		b.Run(fmt.Sprintf("query/%d", n), func(b *testing.B) {
			ix := NewSearchIndex(tools)
			var lat []time.Duration
			i := 0
			for b.Loop() {
				start := time.Now()
				ix.Search(items[i%len(items)].Query, SearchOptions{Limit: 10})
				lat = append(lat, time.Since(start))
				i++
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds()), "p99-µs")
		})
	}
}
