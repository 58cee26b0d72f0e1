package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// catalogSet is one in-process MCP server's tools: one captured catalog
// file's tools (or copies of them with suffixed names).
type catalogSet struct {
	name  string
	tools []toolcache.Tool
}

// loadCatalogs reads every ../shared/catalogs/*.json capture (sorted by
// file name), one set per file. It returns nil, nil when dir is absent.
func loadCatalogs(dir string) ([]catalogSet, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, nil
	}
	slices.Sort(files)
	var sets []catalogSet
	for i, f := range files {
		_, tools, err := toolcache.LoadCatalog(f)
		if err != nil {
			return nil, err
		}
		sets = append(sets, catalogSet{name: fmt.Sprintf("cat%02d", i+1), tools: tools})
	}
	return sets, nil
}

func countTools(sets []catalogSet) int {
	n := 0
	for _, s := range sets {
		n += len(s.tools)
	}
	return n
}

// scaleCatalogs returns exactly n tools from sets: the real tools in order,
// then copies of them with the suffix "_r2", "_r3", ... until n.
func scaleCatalogs(sets []catalogSet, n int) []catalogSet {
	out := make([]catalogSet, len(sets))
	for i, s := range sets {
		out[i].name = s.name
	}
	for copyN, left := 1, n; left > 0; copyN++ {
		for i, s := range sets {
			for _, t := range s.tools {
				if left == 0 {
					break
				}
				if copyN > 1 {
					t.Original += "_r" + strconv.Itoa(copyN)
				}
				out[i].tools = append(out[i].tools, t)
				left--
			}
		}
	}
	return out
}

// inProcessServers builds one in-process mcp-go server per set, each tool
// with its verbatim input schema and a handler that answers "ok". Names
// repeated within one file (aggregated captures) get a "_2", "_3" suffix so
// that every tool is listed.
func inProcessServers(sets []catalogSet) []toolcache.Option {
	var opts []toolcache.Option
	ok := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	for _, s := range sets {
		srv := server.NewMCPServer(s.name, "1.0.0", server.WithToolCapabilities(false))
		seen := map[string]int{}
		tools := make([]server.ServerTool, 0, len(s.tools))
		for _, t := range s.tools {
			name := t.Original
			if seen[name]++; seen[name] > 1 {
				name += "_" + strconv.Itoa(seen[name])
			}
			tools = append(tools, server.ServerTool{Tool: mcp.NewToolWithRawSchema(name, t.Description, t.InputSchema), Handler: ok})
		}
		srv.AddTools(tools...)
		opts = append(opts, toolcache.WithInProcessServer(s.name, srv, toolcache.ServerConfig{}))
	}
	return opts
}

// cpuTime is the CPU (user + system) this process and its live children
// (the MCP server processes the pools spawned) have used so far, in
// seconds: getrusage(RUSAGE_SELF) plus utime + stime of every
// /proc/<pid>/stat whose parent is this process.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	t := tv(ru.Utime) + tv(ru.Stime)
	self := os.Getpid()
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		t += (ut + st) / clockTicks
	}
	return t
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
