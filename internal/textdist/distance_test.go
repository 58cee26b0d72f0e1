package textdist_test

import (
	"fmt"
	"testing"

	"github.com/jetagent/jetagent/internal/textdist"
)

func TestDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"status", "status", 0},
		{"stauts", "status", 1}, // a swap
		{"cancle", "cancel", 1},
		{"sessionMod", "sessionMode", 1},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3}, // OSA: no edits of a swapped pair
		{"日本語", "日本", 1},
		{"ab", "ba", 1},
	}
	for _, tt := range tests {
		if got := textdist.Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := textdist.Distance(tt.b, tt.a); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func ExampleDistance() {
	fmt.Println(textdist.Distance("stauts", "status"), textdist.Distance("read_fiel", "read_file"))
	// Output: 1 1
}

func TestClosest(t *testing.T) {
	t.Parallel()
	words := []string{"queue", "json", "max-rounds", "search-eval", "Default"}
	tests := []struct{ w, want string }{
		{"quue", "queue"},
		{"jsno", "json"},
		{"max-round", "max-rounds"},
		{"serach-eval", "search-eval"},
		{"default", "Default"}, // case is no edit
		{"DEFUALT", "Default"},
		{"js", ""}, // two edits from a four-letter word
		{"zzz", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := textdist.Closest(tt.w, words); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.w, got, tt.want)
		}
	}
	if got := textdist.Closest("ab", []string{"ax", "ay"}); got != "ax" {
		t.Errorf("a tie: %q, want the first", got)
	}
}

func ExampleClosest() {
	fmt.Println(textdist.Closest("tool_mod", []string{"task", "tool_mode", "servers"}))
	// Output: tool_mode
}
