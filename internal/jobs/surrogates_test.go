package jobs

import (
	"errors"
	"strings"
	"testing"
)

// An escape of half a surrogate pair ("a\ud800b") was accepted and run as
// "a\ufffdb": the task run was not the task sent (seen from a Node client,
// whose JSON.stringify writes lone surrogates so). It is refused as not
// JSON, like bytes that are not UTF-8; pairs and other escapes pass.
func TestLoneSurrogatesRefused(t *testing.T) {
	t.Parallel()
	v, err := NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		task string // the JSON text of the task string, quotes included
		want string // "" means accepted
	}{
		{"plain", `"hello"`, ""},
		{"a pair", `"a\ud83d\ude00b"`, ""},
		{"a pair in capitals", `"\uD83D\uDE00"`, ""},
		{"other escapes", `"\u00e9 \\u d800 \" \\\ud83d\ude00"`, ""},
		{"an escaped backslash before u", `"\\ud800"`, ""},
		{"a lone high surrogate", `"a\ud800b"`, "a high surrogate with no low one after it at byte 10 (\\ud800"},
		{"a high surrogate at the end", `"a\udbff"`, "a high surrogate with no low one after it"},
		{"two high surrogates", `"\ud800\ud800"`, "a high surrogate with no low one after it"},
		{"a high surrogate then a letter escape", `"\ud800\u0041"`, "a high surrogate with no low one after it"},
		{"a lone low surrogate", `"x\udc00"`, "a low surrogate with no high one before it"},
		{"a pair reversed", `"\ude00\ud83d"`, "a low surrogate with no high one before it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := v.DecodeJob([]byte(`{"task":` + tt.task + `}`))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("DecodeJob = %v, want it accepted", err)
			case tt.want != "" && (!errors.Is(err, ErrNotJSON) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("DecodeJob = %v, want ErrNotJSON saying %q", err, tt.want)
			}
		})
	}
	// In a member name too.
	if _, err := v.DecodeJob([]byte(`{"task":"x","metadata":{"\udc00":"v"}}`)); !errors.Is(err, ErrNotJSON) {
		t.Errorf("a lone surrogate in a member name: %v, want ErrNotJSON", err)
	}
}
