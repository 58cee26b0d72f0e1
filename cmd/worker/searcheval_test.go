package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSearchEval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	weather := write("weather.json", `{"server":"weather","tools":[{"name":"get_forecast","description":"Weather forecast for a city.","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}},{"name":"get_alerts","description":"Storm alerts."}]}`)
	files := write("files.json", `{"tools":[{"name":"read_file","description":"Read a file."}]}`)
	queries := write("q.jsonl", `{"id":"1","query":"will it rain in Paris tomorrow? forecast please","gold_tools":["get_forecast"],"gold":[{"tool":"get_forecast","servers":["weather"]}]}
{"id":"2","query":"show me the text of notes.txt","gold_tools":["read_file"],"acceptable_alternatives":["get_alerts"]}
{"id":"3","query":"no gold here","gold_tools":[]}
`)
	tests := []struct {
		name string
		args []string
		want func(t *testing.T, out string)
	}{
		{"json", []string{"--json", "--k", "1,5", queries, weather, files}, func(t *testing.T, out string) {
			var m map[string]float64
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if m["items"] != 2 || m["recall@5"] != 1 || m["hit@5"] != 1 || m["p99_us"] <= 0 {
				t.Errorf("got %s", out)
			}
			if _, ok := m["recall@10"]; ok {
				t.Errorf("recall@10 without --k 10: %s", out)
			}
		}},
		{"text, flags after the files", []string{queries, weather, files, "--k", "1"}, func(t *testing.T, out string) {
			if !strings.Contains(out, "2 items with gold tools, 3 tools in 2 catalog files") {
				t.Errorf("got %s", out)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			if code := run(append([]string{"search-eval"}, tc.args...), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			tc.want(t, out.String())
		})
	}
	var out, errb bytes.Buffer
	if code := run([]string{"search-eval", queries}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "at least one catalog") {
		t.Errorf("no catalog: exit %d, %s", code, errb.String())
	}
}
