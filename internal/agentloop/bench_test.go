package agentloop_test

import (
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// BenchmarkBuildAndCount measures what a job start costs per mode on the
// largest shared catalog (527 tools): building the tools array and counting
// its tokens. Compare the sub-benchmarks side by side.
func BenchmarkBuildAndCount(b *testing.B) {
	_, tools, err := toolcache.LoadCatalog("../../../shared/catalogs/livemcptool-70servers.json")
	if err != nil {
		b.Skip("catalog not available:", err)
	}
	for _, mode := range []agentloop.Mode{agentloop.ModeFull, agentloop.ModeDeferred, agentloop.ModeSearch} {
		b.Run(string(mode), func(b *testing.B) {
			for b.Loop() {
				defs, err := agentloop.BuildTools(mode, tools)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := agentloop.ToolTokens(defs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
