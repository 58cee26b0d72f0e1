package agentloop

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// detailsText is valid JSON within its limit whatever the limit, for
// schemas of many parameters, long names, types and descriptions with
// characters JSON escapes.
func TestDetailsTextWithinLimit(t *testing.T) {
	t.Parallel()
	props := make([]string, 300)
	for i := range props {
		props[i] = fmt.Sprintf(`"p<%d>\u00e9%s":{"type":["string","null"],"enum":[%q],"description":"%s"}`,
			i, strings.Repeat("n", i%50), strings.Repeat("<&>", i%40), strings.Repeat("line\\n\\\"quoted\\\" ", i%30))
	}
	schema := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":["p<0>\u00e9","p<3>\u00e9nnn"]}`)
	tool := toolcache.Tool{Name: "t", Description: strings.Repeat("A <long> & \"quoted\" description.\n", 500), InputSchema: schema}
	for limit := 256; limit <= 40_000; limit += 997 {
		out := detailsText(tool, limit)
		if len(out) > limit || !json.Valid([]byte(out)) {
			t.Fatalf("limit %d: %d bytes, valid %v: %.300s", limit, len(out), json.Valid([]byte(out)), out)
		}
	}
}
