package agentloop

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
)

// The cuts of each level: earlier rounds' outputs over 1 KiB keep 256
// bytes (1), then none (2); the last round's over 4 KiB keep 2 KiB (3);
// short outputs, other messages and the input stay as they are.
func TestCompactHistoryLevels(t *testing.T) {
	t.Parallel()
	long, huge, short := strings.Repeat("a", 3000), strings.Repeat("é", 3000), "ok"
	calls := func(id string) []llm.ToolCall {
		return []llm.ToolCall{{ID: id, Type: "function", Function: llm.FunctionCall{Name: "t", Arguments: "{}"}}}
	}
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: long},
		{Role: llm.RoleAssistant, ToolCalls: calls("1")},
		{Role: llm.RoleTool, ToolCallID: "1", Content: long},
		{Role: llm.RoleAssistant, ToolCalls: calls("2")},
		{Role: llm.RoleTool, ToolCallID: "2", Content: short},
		{Role: llm.RoleAssistant, ToolCalls: calls("3")},
		{Role: llm.RoleTool, ToolCallID: "3", Content: huge}, // 6,000 bytes
	}
	for _, tc := range []struct {
		level int
		want  [3]int // bytes kept of outputs 1, 2, 3 (before the mark)
		ok    bool
	}{
		{0, [3]int{3000, 2, 6000}, false},
		{1, [3]int{256, 2, 6000}, true},
		{2, [3]int{0, 2, 6000}, true},
		{3, [3]int{0, 2, 2048}, true},
	} {
		out, c, ok := compactHistory(msgs, tc.level)
		if ok != tc.ok {
			t.Errorf("level %d: ok %v", tc.level, ok)
		}
		if out[0].Content != long || msgs[2].Content != long {
			t.Errorf("level %d: changed the task or msgs itself", tc.level)
		}
		cut := 0
		for i, k := range []int{2, 4, 6} {
			got, _, marked := strings.Cut(out[k].Content, "\n[")
			if !marked {
				got, _, marked = strings.Cut(out[k].Content, "[")
			}
			if len(got) != tc.want[i] {
				t.Errorf("level %d: output %d keeps %d bytes, want %d (%.40q)", tc.level, i+1, len(got), tc.want[i], out[k].Content)
			}
			if marked {
				cut++
				if !strings.HasSuffix(out[k].Content, elidedMark) {
					t.Errorf("level %d: output %d cut without its mark", tc.level, i+1)
				}
			}
		}
		if cut != c.messages {
			t.Errorf("level %d: %d outputs cut, reported %d", tc.level, cut, c.messages)
		}
	}
	// An output one cut would not shorten is left whole.
	if out, _, ok := compactHistory([]llm.Message{{Role: llm.RoleTool, Content: strings.Repeat("b", 1100)}, {Role: llm.RoleAssistant, ToolCalls: calls("x")}}, 2); !ok || !strings.HasSuffix(out[0].Content, elidedMark) {
		t.Errorf("a 1,100-byte earlier output at level 2: %.60q", out[0].Content)
	}
	if out, _, _ := compactHistory([]llm.Message{{Role: llm.RoleTool, Content: strings.Repeat("b", 100)}, {Role: llm.RoleAssistant, ToolCalls: calls("x")}}, 2); len(out[0].Content) != 100 {
		t.Errorf("a 100-byte output was cut: %q", out[0].Content)
	}
}
