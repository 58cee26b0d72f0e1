package agentloop

import (
	"testing"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// BenchmarkFullTokens compares counting the full definitions of the largest
// shared catalog uncached (ToolTokens) with the loop's cache hit.
func BenchmarkFullTokens(b *testing.B) {
	_, tools, err := toolcache.LoadCatalog("../../../shared/catalogs/livemcptool-70servers.json")
	if err != nil {
		b.Skip("catalog not available:", err)
	}
	full, err := BuildTools(ModeFull, tools)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			if _, err := ToolTokens(full); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c tokenCache
		for b.Loop() {
			if _, err := c.count(full); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestTokenCacheMatches(t *testing.T) {
	t.Parallel()
	tools, err := BuildTools(ModeSearch, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ToolTokens(tools)
	if err != nil {
		t.Fatal(err)
	}
	var c tokenCache
	for range 2 {
		if got, err := c.count(tools); err != nil || got != want {
			t.Fatalf("cached count = %d, %v; want %d", got, err, want)
		}
	}
	if n, err := c.count(nil); n != 0 || err != nil {
		t.Fatalf("count(nil) = %d, %v", n, err)
	}
}
