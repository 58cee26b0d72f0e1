package toolcost

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Row is the cost of one catalog.
type Row struct {
	Name  string `json:"name"`
	Tools int    `json:"tools"`
	// Tool-definition tokens of one request in each mode.
	Full     int `json:"full"`
	Deferred int `json:"deferred"`
	Search   int `json:"search"`
	// Code is execute_code (with the catalog's index) and the two
	// search tools.
	Code int `json:"code"`
	// Auto is the mode auto would choose with the given thresholds.
	Auto agentloop.Mode `json:"auto"`
}

// Measure builds the tools array of one request in each mode for tools, as
// the loop would, and counts its tokens.
func Measure(name string, tools []toolcache.Tool, th agentloop.AutoThresholds) (Row, error) {
	row := Row{Name: name, Tools: len(tools)}
	for _, m := range []struct {
		mode agentloop.Mode
		dst  *int
	}{
		{agentloop.ModeFull, &row.Full},
		{agentloop.ModeDeferred, &row.Deferred},
		{agentloop.ModeSearch, &row.Search},
		{agentloop.ModeCode, &row.Code},
	} {
		defs, err := agentloop.BuildTools(m.mode, tools)
		if err != nil {
			return Row{}, fmt.Errorf("toolcost: %s: %s mode: %w", name, m.mode, err)
		}
		n, err := agentloop.ToolTokens(defs)
		if err != nil {
			return Row{}, fmt.Errorf("toolcost: %s: %s mode: %w", name, m.mode, err)
		}
		*m.dst = n
	}
	row.Auto = th.Choose(row.Full)
	return row, nil
}

// Total is the cost of all rows' catalogs offered in one job: full and
// deferred add up, search stays the one fixed meta-tool array, code is
// its array over the largest catalog (the index is bounded in size, so
// this is close). Auto is left empty (it is per catalog).
func Total(rows []Row) Row {
	t := Row{Name: "total"}
	for _, r := range rows {
		t.Tools += r.Tools
		t.Full += r.Full
		t.Deferred += r.Deferred
		t.Search = max(t.Search, r.Search)
		t.Code = max(t.Code, r.Code)
	}
	return t
}

// WriteText writes rows as an aligned table.
func WriteText(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "catalog\ttools\tfull\tdeferred\tsearch\tcode\tdeferred/full\tauto\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.Name, r.Tools, r.Full, r.Deferred, r.Search, r.Code, ratio(r.Deferred, r.Full), r.Auto)
	}
	return tw.Flush()
}

// WriteMarkdown writes rows as a Markdown table (for docs/BENCHMARKS.md).
func WriteMarkdown(w io.Writer, rows []Row) error {
	if _, err := fmt.Fprintln(w, "| catalog | tools | full | deferred | search | code | deferred/full | auto |\n|---|---:|---:|---:|---:|---:|---:|---|"); err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s | %s |\n", r.Name, r.Tools, r.Full, r.Deferred, r.Search, r.Code, ratio(r.Deferred, r.Full), r.Auto); err != nil {
			return err
		}
	}
	return nil
}

func ratio(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}
