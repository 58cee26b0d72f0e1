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

// get_tool_details answers within the tool output limit down to its
// 256-byte floor in both modes. In code mode, with the limit near the
// floor, the head line naming tools.<ident> left a negative limit for the
// summary (an identifier of 41 characters or more): detailsText panicked
// in cutText, taking the worker down; with a shorter one the summary went
// over the limit and was cut mid-JSON. A summary that does not fit now
// gives way to one comment line.
func TestDetailsAnswerWithinLimit(t *testing.T) {
	t.Parallel()
	props := make([]string, 40)
	for i := range props {
		props[i] = fmt.Sprintf(`"param_%02d_%s":{"type":"string","description":"%s"}`, i, strings.Repeat("p", 40), strings.Repeat("d ", 30))
	}
	schema := json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":["param_00_` + strings.Repeat("p", 40) + `"]}`)
	for _, name := range []string{"t", "tool_" + strings.Repeat("n", 30), "tool_" + strings.Repeat("n", 59)} {
		c := newCatalog()
		c.add(toolcache.Tool{Name: name, Description: strings.Repeat("Long <description>. ", 50), InputSchema: schema, Parameters: schema}, kindMCP)
		for _, code := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d-character name, code mode %v", len(name), code), func(t *testing.T) {
				t.Parallel()
				r := newRegistry(c)
				if code {
					r.addCode(codeCatalog(c.tools))
				} else {
					r.addMeta()
				}
				for limit := 256; limit < 3000; limit += 37 {
					out, isErr := r.runMeta(t.Context(), nil, kindGetToolDetails, json.RawMessage(`{"name":"`+name+`"}`), limit, func(error) {})
					if isErr || len(out) > limit {
						t.Fatalf("limit %d: error %v, %d bytes: %s", limit, isErr, len(out), out)
					}
					body := out
					if code {
						head, rest, ok := strings.Cut(out, "\n")
						if !strings.HasPrefix(head, "// The TypeScript declarations of tools.") {
							t.Fatalf("limit %d: %s", limit, out)
						}
						if !ok {
							continue // the one comment line
						}
						body = rest
					}
					if !json.Valid([]byte(body)) {
						t.Fatalf("limit %d: not valid JSON: %s", limit, out)
					}
				}
			})
		}
	}
}
