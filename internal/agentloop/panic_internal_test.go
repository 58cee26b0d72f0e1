package agentloop

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// calling runs f, returning its panic (nil: none).
func calling(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// TestSharedBuildPanicNotKept: a catalog or a tools array shared by the
// jobs of a catalog whose build panics (a ToolSet's listing that panics,
// on the runner's goroutine) fails that build with an error naming the
// panic, and is not kept: the next job builds again. The empty slot was
// kept, and every later job of the catalog version got a nil catalog (a
// nil dereference) or no tools at all, without an error.
func TestSharedBuildPanicNotKept(t *testing.T) {
	t.Parallel()
	t.Run("catalog", func(t *testing.T) {
		t.Parallel()
		var tc tokenCache
		key := catalogKey{version: 1, selection: "all"}
		var err error
		if p := calling(func() {
			_, err = tc.catalog(key, func() (*catalog, error) { panic("listing broke") })
		}); p != nil || err == nil || !strings.Contains(err.Error(), "listing broke") {
			t.Errorf("a build that panicked: panic %v, err %v; want an error naming it", p, err)
		}
		want := &catalog{}
		if c, err := tc.catalog(key, func() (*catalog, error) { return want, nil }); c != want || err != nil {
			t.Errorf("the next build: %p, %v; want the catalog built again", c, err)
		}
	})
	t.Run("tools array", func(t *testing.T) {
		t.Parallel()
		var m modeTools
		count := func([]llm.Tool) (int, error) { return 7, nil }
		var err error
		if p := calling(func() {
			_, _, err = m.get(func() []llm.Tool { panic("build broke") }, count)
		}); p != nil || err == nil || !strings.Contains(err.Error(), "build broke") {
			t.Errorf("a build that panicked: panic %v, err %v; want an error naming it", p, err)
		}
		tools, toks, err := m.get(func() []llm.Tool { return []llm.Tool{{Name: "a"}} }, count)
		if len(tools) != 1 || toks != 7 || err != nil {
			t.Errorf("the next build: %v, %d, %v; want the array built again", tools, toks, err)
		}
	})
}

// toolcache.View masks what the loop shows of a recovered panic: without
// MaskSecrets on it, production jobs' panic values were not masked.
var _ secretMasker = (*toolcache.View)(nil)
