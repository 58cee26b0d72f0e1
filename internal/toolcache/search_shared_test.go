package toolcache

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
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
// whole-request queries, at 1,000 and 10,000 tools. query/N cycles through
// the development set's tasks; query-long/N through two long requests
// made from the catalogs (about 20,000 characters of tool descriptions,
// the worst case for scoring since every word is in the index, and the
// same with 16 KB of base64 pasted after it). p99 is over every search;
// worst-median is the median of the slowest request, which a busy machine
// disturbs less than the p99.
func BenchmarkSearchScale(b *testing.B) {
	items := loadDevSet(b)
	var dev []string
	for _, it := range items {
		dev = append(dev, it.Query)
	}
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
		ix := NewSearchIndex(tools)
		b.Run(fmt.Sprintf("query/%d", n), func(b *testing.B) { benchQueries(b, ix, dev) })
		b.Run(fmt.Sprintf("query-long/%d", n), func(b *testing.B) { benchQueries(b, ix, longRequests(tools)) })
	}
}

// benchQueries runs the queries in turn, limit 10, and reports latency
// percentiles: of wall time, and of the CPU time of the search's thread
// (p99-cpu), which is what the search costs when the machine is not busy
// with other work.
func benchQueries(b *testing.B, ix *SearchIndex, queries []string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lat := make([][]time.Duration, len(queries))
	var all, cpu []time.Duration
	i := 0
	for b.Loop() {
		q := i % len(queries)
		c0, cpuOK := threadCPU()
		start := time.Now()
		ix.Search(queries[q], SearchOptions{Limit: 10})
		d := time.Since(start)
		if c1, ok := threadCPU(); ok && cpuOK {
			cpu = append(cpu, c1-c0)
		}
		lat[q] = append(lat[q], d)
		all = append(all, d)
		i++
	}
	if len(cpu) > 0 {
		slices.Sort(cpu)
		b.ReportMetric(float64(cpu[min(len(cpu)-1, len(cpu)*99/100)].Microseconds()), "p99-cpu-µs")
	}
	slices.Sort(all)
	worst := time.Duration(0)
	for _, l := range lat {
		if len(l) > 0 {
			slices.Sort(l)
			worst = max(worst, l[len(l)/2])
		}
	}
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[min(len(all)-1, len(all)*99/100)].Microseconds()), "p99-µs")
	b.ReportMetric(float64(worst.Microseconds()), "worst-median-µs")
}

// longRequests are two long requests made from the tools' own
// descriptions: about 20,000 characters of prose, and the same followed by
// 16 KB of base64.
func longRequests(tools []Tool) []string {
	var sb strings.Builder
	for i := 0; sb.Len() < 20000; i++ {
		sb.WriteString(tools[(i*7919)%len(tools)].Description)
		sb.WriteString(" ")
	}
	prose := sb.String()
	blob := make([]byte, 12*1024)
	for i := range blob {
		blob[i] = byte(i*31 + i/7)
	}
	return []string{prose, prose + "\n" + base64.StdEncoding.EncodeToString(blob)}
}
