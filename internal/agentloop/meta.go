package agentloop

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// searchHit is one search_tools result.
type searchHit struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// searchTools ranks the catalog against query by keyword overlap with names
// (weighted) and descriptions. Ties keep catalog order.
func (r *registry) searchTools(query string, limit int) []searchHit {
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	limit = min(limit, maxSearchLimit)
	terms := words(query)
	lq := strings.ToLower(strings.TrimSpace(query))
	type scored struct {
		i, score int
	}
	var s []scored
	for i, t := range r.catalog {
		name := strings.ToLower(t.Name)
		nameWords := map[string]bool{}
		for _, w := range words(t.Name) {
			nameWords[w] = true
		}
		desc := strings.ToLower(t.Title + " " + t.Description)
		score := 0
		if lq != "" && strings.Contains(name, lq) {
			score += 5
		}
		for _, w := range terms {
			switch {
			case nameWords[w]:
				score += 3
			case strings.Contains(name, w):
				score += 2
			}
			if strings.Contains(desc, w) {
				score++
			}
		}
		if score > 0 {
			s = append(s, scored{i, score})
		}
	}
	sort.SliceStable(s, func(a, b int) bool { return s[a].score > s[b].score })
	hits := make([]searchHit, 0, min(limit, len(s)))
	for k := 0; k < len(s) && k < limit; k++ {
		t := r.catalog[s[k].i]
		hits = append(hits, searchHit{Name: t.Name, Description: OneLine(t.Description)})
	}
	return hits
}

// words splits text into lower-case keywords, breaking snake_case,
// kebab-case and camelCase, and dropping one-letter words.
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 1 {
			out = append(out, strings.ToLower(string(cur)))
		}
		cur = cur[:0]
	}
	var prev rune
	for _, c := range s {
		switch {
		case unicode.IsUpper(c) && unicode.IsLower(prev):
			flush()
			cur = append(cur, c)
		case unicode.IsLetter(c) || unicode.IsDigit(c):
			cur = append(cur, c)
		default:
			flush()
		}
		prev = c
	}
	flush()
	return out
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
