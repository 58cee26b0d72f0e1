package toolcache

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"

	"github.com/jetagent/jetagent/internal/llm"
)

// o200k is loaded once: building the vocabulary takes tens of milliseconds,
// and a Codec is read-only afterwards.
var o200k = sync.OnceValues(func() (tokenizer.Codec, error) {
	return tokenizer.Get(tokenizer.O200kBase)
})

// CountToolTokens counts the o200k_base tokens of tools as an OpenAI "tools"
// parameter: exactly the bytes the llm client sends (llm.ToolsJSON), so the
// figure the loop reports is the cost the definitions add to every request.
// Providers add a small per-request framing overhead that this does not model.
func CountToolTokens(tools []llm.Tool) (int, error) {
	b, err := llm.ToolsJSON(tools)
	if err != nil || b == nil {
		return 0, err
	}
	return CountTokens(string(b))
}

// CountTokens counts the o200k_base tokens of s.
func CountTokens(s string) (int, error) {
	codec, err := o200k()
	if err != nil {
		return 0, fmt.Errorf("toolcache: tokenizer: %w", err)
	}
	n, err := codec.Count(s)
	if err != nil {
		return 0, fmt.Errorf("toolcache: count tokens: %w", err)
	}
	return n, nil
}

// LLMTool is the full-mode definition of t: its name, description and
// normalised parameters.
func (t Tool) LLMTool() llm.Tool {
	params := t.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	return llm.Tool{Name: t.Name, Description: t.Description, Parameters: params}
}

// LLMTools converts tools to their full-mode definitions.
func LLMTools(tools []Tool) []llm.Tool {
	out := make([]llm.Tool, len(tools))
	for i, t := range tools {
		out[i] = t.LLMTool()
	}
	return out
}
