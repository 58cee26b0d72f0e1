package agentloop

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/cfgerr"
)

// nearMissCorpus is testdata/nearmiss.json: near-miss outputs of open
// models, with what the loop must make of each (the agentrun end-to-end
// test runs the same file through NATS).
type nearMissCorpus struct {
	Tools   map[string]json.RawMessage `json:"tools"`
	Entries []struct {
		Name    string  `json:"name"`
		Source  string  `json:"source"`
		Content string  `json:"content"`
		Expect  string  `json:"expect"`
		Rest    *string `json:"rest"`
		Want    []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"want"`
	} `json:"entries"`
}

func loadNearMissCorpus(t testing.TB) nearMissCorpus {
	t.Helper()
	b, err := os.ReadFile("testdata/nearmiss.json")
	if err != nil {
		t.Fatal(err)
	}
	var c nearMissCorpus
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// readAsTheLoop reads content as the loop does: the well-formed shapes,
// else the tolerant reader.
func readAsTheLoop(content string, lookup func(string) (json.RawMessage, bool)) ([]string, string) {
	calls, rest := extractContentCalls(content, 1, lookup)
	var got []string
	for _, c := range calls {
		got = append(got, c.Function.Name+string(compactJSON(json.RawMessage(c.Function.Arguments))))
	}
	if len(got) > 0 {
		return got, rest
	}
	nm, rest := readNearMiss(content, lookup)
	for _, c := range nm {
		got = append(got, c.name+c.args)
	}
	return got, rest
}

func TestNearMissCorpus(t *testing.T) {
	t.Parallel()
	corpus := loadNearMissCorpus(t)
	lookup := func(n string) (json.RawMessage, bool) { s, ok := corpus.Tools[n]; return s, ok }
	for _, e := range corpus.Entries {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			got, rest := readAsTheLoop(e.Content, lookup)
			var want []string
			for _, w := range e.Want {
				want = append(want, w.Name+string(compactJSON(w.Arguments)))
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("calls %v, want %v\ncontent: %q", got, want, e.Content)
			}
			if e.Rest != nil && rest != *e.Rest {
				t.Errorf("rest %q, want %q", rest, *e.Rest)
			}
			reason := ""
			if len(got) == 0 {
				reason = debrisReason(e.Content, lookup)
			}
			switch e.Expect {
			case "reask":
				if reason == "" {
					t.Errorf("not seen as a failed call")
				}
			case "answer":
				if reason != "" || rest != e.Content {
					t.Errorf("an answer taken for debris (%s) or changed (%q)", reason, rest)
				}
			}
		})
	}
}

func TestContentCallsPolicy(t *testing.T) {
	t.Parallel()
	c := ParseContentCalls(" on , gpt-4*=OFF, *qwen*=auto,Qwen/*=off")
	for _, tc := range []struct {
		model string
		want  ContentCallMode
	}{
		{"gpt-4o-mini", ContentCallsOff},
		{"Qwen/Qwen2.5-7B-Instruct", ContentCallsAuto}, // the first match wins
		{"llama3.2:3b", ContentCallsOn},
		{"", ContentCallsOn},
	} {
		if got := c.For(tc.model); got != tc.want {
			t.Errorf("For(%q) = %s, want %s", tc.model, got, tc.want)
		}
	}
	if got := (ContentCalls{}).For("x"); got != ContentCallsAuto {
		t.Errorf("zero policy: %s", got)
	}
	for _, tc := range []struct{ in, field string }{
		{"sometimes", "ContentCalls.Default"},
		{"=on", "ContentCalls.Models"},
		{"m*=maybe", "ContentCalls.Models"},
	} {
		err := Config{ContentCalls: ParseContentCalls(tc.in)}.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), "content-call") && !strings.Contains(err.Error(), "glob") {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if fe, ok := asFieldError(err); !ok || fe != tc.field {
			t.Errorf("%q: field %q, want %s", tc.in, fe, tc.field)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p, n string
		ok   bool
	}{
		{"*", "", true}, {"a*c", "abbbc", true}, {"a*c", "abcd", false}, {"?b", "ab", true},
		{"*/*", "org/model", true}, {"q*n*", "qwen", true}, {"abc", "ab", false}, {"a**", "a", true},
	} {
		if got := globMatch(tc.p, tc.n); got != tc.ok {
			t.Errorf("globMatch(%q, %q) = %v", tc.p, tc.n, got)
		}
	}
}

func TestLenientJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1}`, `{"a":1}`},
		{`{'a': 'x', 'b': [1, 2,],}`, `{"a":"x","b":[1,2]}`},
		{`{a: True, b: None}`, `{"a":true,"b":null}`},
		{`{"a": 1 // note` + "\n}", `{"a":1}`},
		{`{"city": Paris}`, ""}, // a bare word is no value
		{`{"a": "trunc`, ""},
		{`{"a": 1} trailing`, ""},
		{`["x", callback(1)]`, ""},
		{`plain`, ""},
	} {
		got, ok := lenientJSON(tc.in)
		if (tc.want == "") == ok || (ok && string(got) != tc.want) {
			t.Errorf("lenientJSON(%q) = %s, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func asFieldError(err error) (string, bool) {
	fe, ok := cfgerr.As(err)
	if !ok || len(fe.Fields) == 0 {
		return "", false
	}
	return fe.Fields[0], true
}

// FuzzReadNearMiss: whatever the content, the tolerant reader and the
// debris detector do not panic; every call it takes names a known tool
// with a JSON object of arguments, from a span inside the content; without
// calls the content is left as it was, with calls the rest is shorter.
func FuzzReadNearMiss(f *testing.F) {
	corpus := loadNearMissCorpus(f)
	for _, e := range corpus.Entries {
		f.Add(e.Content)
	}
	lookup := func(n string) (json.RawMessage, bool) { s, ok := corpus.Tools[n]; return s, ok }
	f.Fuzz(func(t *testing.T, content string) {
		calls, rest := readNearMiss(content, lookup)
		_ = debrisReason(content, lookup)
		if len(calls) == 0 {
			if rest != content {
				t.Fatalf("no calls but content changed: %q -> %q", content, rest)
			}
			return
		}
		if len(rest) >= len(content) {
			t.Fatalf("calls taken but rest %q not shorter than %q", rest, content)
		}
		for _, c := range calls {
			var args map[string]any
			if _, ok := lookup(c.name); !ok || json.Unmarshal([]byte(c.args), &args) != nil || args == nil {
				t.Fatalf("call %s(%s) from %q", c.name, c.args, content)
			}
			if c.start < 0 || c.end > len(content) || c.start > c.end {
				t.Fatalf("span %d..%d of %d bytes", c.start, c.end, len(content))
			}
		}
	})
}
