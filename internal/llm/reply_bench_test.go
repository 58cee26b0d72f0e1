package llm

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkJudgeReply is the check every 2xx reply gets before openai-go
// decodes it, on an ordinary completion with a tool call.
func BenchmarkJudgeReply(b *testing.B) {
	content := strings.Repeat("The forecast for Paris is mild, with light rain later. ", 30)
	body := []byte(fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"units\":\"c\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":812,"completion_tokens":41,"total_tokens":853}}`, content))
	res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := judgeReply(res, body); err != nil {
			b.Fatal(err)
		}
	}
}
