package agentloop

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// searchHit is one search_tools result.
type searchHit struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// searchTools ranks the whole catalog (MCP, client and bridge tools) with
// the registry's BM25 search. The index is built on the first search of a
// job.
func (r *registry) searchTools(query string, limit int) []searchHit {
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	limit = min(limit, maxSearchLimit)
	r.searchOnce.Do(func() {
		// Names are final already: with Original = Name and no server,
		// the registry keeps them as they are.
		tools := make([]toolcache.Tool, len(r.catalog))
		for i, t := range r.catalog {
			t.Original, t.Server = t.Name, ""
			tools[i] = t
		}
		r.index = toolcache.NewRegistry(tools)
	})
	var hits []searchHit
	for _, t := range r.index.Search(query, limit) {
		if e, ok := r.byName[t.Name]; ok {
			hits = append(hits, searchHit{Name: e.tool.Name, Description: OneLine(e.tool.Description)})
		}
	}
	return hits
}

// toolDetails is get_tool_details' answer.
type toolDetails struct {
	Name         string                `json:"name"`
	Title        string                `json:"title,omitempty"`
	Description  string                `json:"description,omitempty"`
	InputSchema  json.RawMessage       `json:"input_schema"`
	OutputSchema json.RawMessage       `json:"output_schema,omitempty"`
	Annotations  toolcache.Annotations `json:"annotations"`
}

func details(t toolcache.Tool) toolDetails {
	return toolDetails{
		Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: parameters(t), OutputSchema: t.OutputSchema, Annotations: t.Annotations,
	}
}

// runMeta answers search_tools and get_tool_details (args already valid).
func (r *registry) runMeta(k toolKind, args json.RawMessage) (string, bool) {
	switch k {
	case kindSearchTools:
		var a struct {
			Query string `json:"query"`
			Limit int    `json:"limit"`
		}
		_ = json.Unmarshal(args, &a)
		hits := r.searchTools(a.Query, a.Limit)
		if len(hits) == 0 {
			return fmt.Sprintf("No tools match %q. Try other or fewer keywords.", a.Query), false
		}
		return mustJSON(hits), false
	case kindGetToolDetails:
		var a struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(args, &a)
		e, ok := r.byName[a.Name]
		if !ok {
			return "Error: " + r.unknownToolError(a.Name, false).Error(), true
		}
		return mustJSON(details(e.tool)), false
	}
	return fmt.Sprintf("Error: tool kind %d is not a meta tool", k), true
}

// runResource answers the resource bridge tools (args already valid).
func runResource(ctx context.Context, ts ToolSet, k toolKind, args json.RawMessage) (string, bool, error) {
	if k == kindListResources {
		res, err := ts.ListResources(ctx)
		if err != nil {
			return "", true, err
		}
		return mustJSON(res), false, nil
	}
	var a struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(args, &a)
	text, err := ts.ReadResource(ctx, a.URI)
	if err != nil {
		return "", true, err
	}
	return text, false, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("Error: encoding result: %v", err)
	}
	return string(b)
}
