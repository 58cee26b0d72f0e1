package llm_test

import (
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// DeepSeek's API reports the prompt's cache hits as
// prompt_cache_hit_tokens (and misses as prompt_cache_miss_tokens), not
// OpenAI's prompt_tokens_details.cached_tokens. Before: its cached prompt
// tokens were always 0 in the job's usage, its llm.response events and
// metrics, as if its prompt cache never hit.
func TestCacheHitsUnderDeepSeeksName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, usage string
		want        int64
	}{
		{"DeepSeek", `{"prompt_tokens":1200,"completion_tokens":5,"total_tokens":1205,"prompt_cache_hit_tokens":1024,"prompt_cache_miss_tokens":176}`, 1024},
		{"DeepSeek, as a string", `{"prompt_tokens":1200,"completion_tokens":5,"prompt_cache_hit_tokens":"1024"}`, 1024},
		{"OpenAI's name wins", `{"prompt_tokens":1200,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":896},"prompt_cache_hit_tokens":1024}`, 896},
		{"negative", `{"prompt_tokens":1200,"completion_tokens":5,"prompt_cache_hit_tokens":-3}`, 0},
		{"absurd", `{"prompt_tokens":1200,"completion_tokens":5,"prompt_cache_hit_tokens":1e300}`, 1 << 40},
		{"not a number", `{"prompt_tokens":1200,"completion_tokens":5,"prompt_cache_hit_tokens":{"n":3}}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Reply{Body: `{"id":"x","object":"chat.completion","created":1,"model":"deepseek-chat",` +
				`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":` + tc.usage + `}`})
			resp, err := newClient(t, s, nil).Complete(testCtx(t), userRequest())
			if err != nil {
				t.Fatal(err)
			}
			if want := (llm.Usage{PromptTokens: 1200, CompletionTokens: 5, CachedPromptTokens: tc.want}); resp.Usage != want {
				t.Errorf("usage %+v, want %+v", resp.Usage, want)
			}
		})
	}
}
