package redact_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/redact"
)

// TestForms: a secret quoted by a JSON encoder or in a URL is written
// otherwise than as it is; each way is a form to mask.
func TestForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		secret string
		want   []string
	}{
		{"ghp_abc123def456", []string{"ghp_abc123def456"}},
		{`p"q\w`, []string{`p"q\w`, `p\"q\\w`, "p%22q%5Cw"}},
		{"a<b>&c/d", []string{"a<b>&c/d", `a\u003cb\u003e\u0026c/d`, `a\u003cb\u003e\u0026c\/d`, `a<b>&c\/d`, "a%3Cb%3E%26c%2Fd", "a%3Cb%3E&c%2Fd"}},
		{"pass word+1", []string{"pass word+1", "pass+word%2B1", "pass%20word+1"}},
		{"kéy\n", []string{"kéy\n", `kéy\n`, `k\u00e9y\n`, "k%C3%A9y%0A"}},
		{"😀x", []string{"😀x", `\ud83d\ude00x`, "%F0%9F%98%80x"}},
		{"", nil},
	} {
		if got := redact.Forms(tc.secret); !slices.Equal(got, tc.want) {
			t.Errorf("Forms(%q) = %q, want %q", tc.secret, got, tc.want)
		}
	}
}

// TestJSON: secrets come out of a JSON document's strings, its keys
// included, whatever escapes an encoder wrote them with; the document
// stays valid JSON and is otherwise unchanged, byte for byte.
func TestJSON(t *testing.T) {
	t.Parallel()
	secrets := func(ss ...string) []string {
		var out []string
		for _, s := range ss {
			out = append(out, redact.Forms(s)...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		raw     string
		secrets []string
		want    string
	}{
		{"value", `{"GITHUB_TOKEN": "ghp_abc123def456", "n": 1}`, secrets("ghp_abc123def456"), `{"GITHUB_TOKEN": "xxxxx", "n": 1}`},
		{"inside a value", `{"auth":"Bearer ghp_abc123def456"}`, secrets("ghp_abc123def456"), `{"auth":"Bearer xxxxx"}`},
		{"key", `{"ghp_abc123def456":{"scopes":["repo"]}}`, secrets("ghp_abc123def456"), `{"xxxxx":{"scopes":["repo"]}}`},
		{"escaped quote", `["p\"q\\w-123456"]`, secrets(`p"q\w-123456`), `["xxxxx"]`},
		{"Go's HTML escapes", `{"v":"a\u003cb\u003e-123456"}`, secrets("a<b>-123456"), `{"v":"xxxxx"}`},
		{"PHP's slash", `{"v":"ab\/cd\/123456"}`, secrets("ab/cd/123456"), `{"v":"xxxxx"}`},
		{"Python's ASCII", `{"v":"k\u00e9y-123456"}`, secrets("kéy-123456"), `{"v":"xxxxx"}`},
		{"number", `{"pin":12345678,"s":"12345678","n":[-12345678.5e3,123456789,1234567,true]}`, secrets("12345678"), `{"pin":"xxxxx","s":"xxxxx","n":["xxxxx","xxxxx",1234567,true]}`},
		{"other escapes kept", `{"a":"line\nnext \u00e9","b":"tok-123456789"}`, secrets("tok-123456789"), `{"a":"line\nnext \u00e9","b":"xxxxx"}`},
		{"cut escape re-encoded", `{"v":"x\\\\tok-123456789"}`, []string{`\tok-123456789`}, `{"v":"x\\xxxxx"}`},
		{"odd escapes", `{"v":"\u0067hp_abc123def456","\u0067hp_abc123def456":"\u0041\u003c"}`, secrets("ghp_abc123def456"), `{"v":"xxxxx","xxxxx":"\u0041\u003c"}`},
		{"odd escapes in part", `["Bearer ghp_abc\u00312\u0033def456 ok", "\\u0067hp_abc123def456"]`, secrets("ghp_abc123def456"), `["Bearer xxxxx ok", "\\u0067hp_abc123def456"]`},
		{"odd escape, no secret", `{"v":"\u0041B"}`, secrets("ghp_abc123def456"), `{"v":"\u0041B"}`},
		{"nothing", `{"a": "b"}`, secrets("ghp_abc123def456"), `{"a": "b"}`},
		{"not JSON", `token=ghp_abc123def456 {`, secrets("ghp_abc123def456"), `token=xxxxx {`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := string(redact.JSON([]byte(tc.raw), tc.secrets))
			if got != tc.want {
				t.Errorf("JSON(%s) = %s, want %s", tc.raw, got, tc.want)
			}
			if json.Valid([]byte(tc.raw)) && !json.Valid([]byte(got)) {
				t.Errorf("JSON(%s) = %s: no longer valid JSON", tc.raw, got)
			}
		})
	}
}

// TestJSONKeysStayDistinct: two keys of an object masked to the same
// "xxxxx" lost one value to any decoder (it keeps one value a key); a
// masked key that is the same as another key of its object now has a
// suffix no key of the object has, and every value is kept.
func TestJSONKeysStayDistinct(t *testing.T) {
	t.Parallel()
	secrets := append(redact.Forms("ghp_abc123def456"), redact.Forms("ghp_zzz999yyy888")...)
	for _, tc := range []struct{ raw, want string }{
		{`{"ghp_abc123def456":1,"ghp_zzz999yyy888":2}`, `{"xxxxx":1,"xxxxx#2":2}`},
		{`{"xxxxx":1, "ghp_abc123def456" : 2}`, `{"xxxxx":1, "xxxxx#2" : 2}`},
		{`{"ghp_abc123def456":1,"ghp_zzz999yyy888":2,"xxxxx#2":3}`, `{"xxxxx":1,"xxxxx#3":2,"xxxxx#2":3}`},
		{`{"t ghp_abc123def456":1,"t ghp_zzz999yyy888":[{"ghp_abc123def456":"ghp_zzz999yyy888"}]}`, `{"t xxxxx":1,"t xxxxx#2":[{"xxxxx":"xxxxx"}]}`},
		{`[{"ghp_abc123def456":1},{"ghp_zzz999yyy888":2}]`, `[{"xxxxx":1},{"xxxxx":2}]`},
		{`{"a":"ghp_abc123def456","b":"ghp_zzz999yyy888"}`, `{"a":"xxxxx","b":"xxxxx"}`},
		{`"ghp_abc123def456"`, `"xxxxx"`},
	} {
		got := redact.JSON([]byte(tc.raw), secrets)
		if string(got) != tc.want {
			t.Errorf("JSON(%s) = %s, want %s", tc.raw, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("JSON(%s) = %s: no longer valid", tc.raw, got)
		}
	}
}

// TestJSONStaysValid: whatever a secret holds, and wherever it occurs,
// a masked valid document is valid.
func TestJSONStaysValid(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{"a":"\\\\\"\"\\u0041","b":["\u0041\u0042",1,true,null],"c\\\"":{"d":"e"}}`,
		`["\\", "\"", "\\\"", "a\\b\"c"]`,
	}
	for _, doc := range docs {
		for i := 0; i < len(doc); i++ {
			for j := i + 1; j <= len(doc) && j <= i+6; j++ {
				got := redact.JSON([]byte(doc), []string{doc[i:j]})
				if !json.Valid(got) {
					t.Fatalf("JSON(%s) masking %q = %s: no longer valid", doc, doc[i:j], got)
				}
			}
		}
	}
}

// BenchmarkLargeResult: a tool's result of 1 MiB with 10 secrets (their
// Forms: 10 to 30 patterns), as text and as a JSON document, a few
// secrets occurring in it; ns/op grows linearly with the size
// (go test -run '^$' -bench LargeResult ./internal/redact/).
func BenchmarkLargeResult(b *testing.B) {
	var secrets []string
	for i := range 10 {
		secrets = append(secrets, redact.Forms(fmt.Sprintf("sk-%02d/a1B2c3D4e5F6g7H8\"", i))...)
	}
	line := `{"path":"/srv/data/file-0001.txt","size":12345,"owner":"someone","note":"an ordinary line of output"},`
	for _, n := range []int{1 << 18, 1 << 20} {
		body := strings.Repeat(line, n/len(line))
		doc := "[" + body + `{"token":"sk-03/a1B2c3D4e5F6g7H8\""}]`
		b.Run(fmt.Sprintf("text/%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				redact.Text(doc, secrets)
			}
		})
		b.Run(fmt.Sprintf("json/%d", n), func(b *testing.B) {
			raw := []byte(doc)
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				redact.JSON(raw, secrets)
			}
		})
	}
}

// TestWindow: a window cut out of a longer text (a log's tail, a line's
// start) may begin with a secret's end or end with its start; those
// parts are masked, as whole secrets are.
func TestWindow(t *testing.T) {
	t.Parallel()
	sec := []string{"ghp_16C7e42F292c6912E7710c838347Ae178B4a"}
	for _, tc := range []struct {
		s                   string
		cutBefore, cutAfter bool
		want                string
	}{
		{"c838347Ae178B4a refused; token ghp_16C7e42F292c6912E7710c838347Ae178B4a", true, false, "xxxxx refused; token xxxxx"},
		{"using token ghp_16C7e42F2", false, true, "using token xxxxx"},
		{"using token ghp_16C7e42F2", false, false, "using token ghp_16C7e42F2"}, // not cut: no part to mask
		{"B4a then ghp", true, true, "B4a then ghp"},                             // parts under 4 bytes
		{"E7710c8", true, true, "xxxxx"},
		{"ordinary text", true, true, "ordinary text"},
		{"", true, true, ""},
	} {
		if got := redact.Window(tc.s, sec, tc.cutBefore, tc.cutAfter); got != tc.want {
			t.Errorf("Window(%q, %v, %v) = %q, want %q", tc.s, tc.cutBefore, tc.cutAfter, got, tc.want)
		}
	}
}

// TestTextAcross: a secret split across two pieces joined by a separator
// is masked on both sides of it; the separator and the rest are kept.
func TestTextAcross(t *testing.T) {
	t.Parallel()
	const sec = "ghp_abc123def456"
	for _, tc := range []struct {
		s    string
		seps []int
		want string
	}{
		{"a ghp_abc1\n23def456 b", []int{10}, "a xxxxx\nxxxxx b"},
		{"ghp_abc123def45\n6", []int{15}, "xxxxx\nxxxxx"},
		{"ghp_abc123def456\nghp_abc123def456", []int{16}, "xxxxx\nxxxxx"},
		{"ghp_abc1\n23def456", nil, "ghp_abc1\n23def456"}, // no separator there: two texts
		{"ghp_abc1\nx23def456", []int{8}, "ghp_abc1\nx23def456"},
		{"one\ntwo", []int{3}, "one\ntwo"},
		{"", []int{0}, ""},
	} {
		if got := redact.TextAcross(tc.s, tc.seps, redact.Forms(sec)); got != tc.want {
			t.Errorf("TextAcross(%q, %v) = %q, want %q", tc.s, tc.seps, got, tc.want)
		}
	}
}
