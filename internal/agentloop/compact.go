package agentloop

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jetagent/jetagent/internal/llm"
)

// A server whose context window a job's history outgrows refuses the next
// request (vLLM: "This model's maximum context length is 4096 tokens.
// However, you requested 5113 tokens ...", llama.cpp: "the request
// exceeds the available context size", OpenAI: code
// context_length_exceeded), and the job failed with it: a long job on a
// local model with a small window. The loop then sends the request again
// with the tool outputs the model has already read cut down, a step at a
// time, and every later request of the job with the same cut (the
// transcripts keep what the tools said; the tool.result events have it
// all):
//
//  1. outputs of earlier rounds over 1 KiB keep their first 256 bytes;
//  2. outputs of earlier rounds keep none;
//  3. the last round's outputs over 4 KiB keep their first 2 KiB.
//
// Each cut output says how many bytes were left out and where they are.
const maxCompactLevel = 3

// contextPhrases are the words of the servers' refusals of a prompt over
// the model's window. Some name no context: TGI's messages API (a 422,
// "Input validation error: `inputs` tokens + `max_new_tokens` must be
// <= 4096. Given: ...", or "`inputs` must have less than 4096 tokens"),
// Gemini's ("The input token count (132478) exceeds the maximum number
// of tokens allowed (131072)."), llama.cpp's older server and LM
// Studio's ("Cannot truncate prompt with n_keep (14169) >= n_ctx
// (4096)").
var contextPhrases = []string{
	"context length", "context_length", "context window", "context size", "maximum context",
	"prompt is too long", "input is too long", "too many tokens", "reduce the length of the messages",
	"exceeds the model's", "maximum prompt length", "prompt too long",
	"`inputs` tokens + `max_new_tokens` must be", "`inputs` must have less than",
	"exceeds the maximum number of tokens allowed", "cannot truncate prompt with n_keep",
}

// contextExceeded reports whether err is a server's refusal of a request
// too long for the model's context window.
func contextExceeded(err error) bool {
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.Status < 400 || apiErr.Status >= 500 || apiErr.Status == 429 {
		return false // 429: a rate limit ("tokens per minute") is not the window; cutting history would not lift it
	}
	if apiErr.Code == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(apiErr.Message)
	for _, p := range contextPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// compacted is what a compaction of a request left out.
type compacted struct {
	messages int // tool outputs cut
	bytes    int // bytes left out
}

// compactHistory returns msgs with the cuts of levels 1 to level applied
// (on copies; msgs is not changed) and what they left out; ok is false
// when level cuts no more than level-1 does.
func compactHistory(msgs []llm.Message, level int) (out []llm.Message, c compacted, ok bool) {
	out, c = cutHistory(msgs, level)
	_, prev := cutHistory(msgs, level-1)
	return out, c, c.bytes > prev.bytes
}

func cutHistory(msgs []llm.Message, level int) ([]llm.Message, compacted) {
	var c compacted
	if level <= 0 {
		return msgs, c
	}
	last := -1 // the last round's assistant message: its outputs are the freshest
	for i, m := range msgs {
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			last = i
		}
	}
	out := append([]llm.Message(nil), msgs...)
	for i := range out {
		m := &out[i]
		if m.Role != llm.RoleTool {
			continue
		}
		over, keep := -1, 0
		switch {
		case i < last && level >= 2:
			over, keep = 0, 0
		case i < last:
			over, keep = 1<<10, 256
		case level >= 3:
			over, keep = 4<<10, 2<<10
		}
		if over < 0 {
			continue
		}
		if cut, n := cutOutput(m.Content, over, keep); n > 0 {
			m.Content = cut
			c.messages++
			c.bytes += n
		}
	}
	return out, c
}

// elidedMark ends a cut output.
const elidedMark = " bytes of this tool output were left out to fit the model's context window; the job's tool.result event has them]"

// cutOutput keeps the first keep bytes (on a rune boundary) of s when s is
// longer than over and keeping less, and says how many bytes it left out.
func cutOutput(s string, over, keep int) (string, int) {
	k := runeCut(s, keep)
	if len(s) <= over || len(s)-k <= len(elidedMark)+16 {
		return s, 0 // short already: the mark would make it no shorter
	}
	left := len(s) - k
	prefix := s[:k]
	if prefix != "" {
		prefix += "\n"
	}
	return fmt.Sprintf("%s[%d%s", prefix, left, elidedMark), left
}

// stillOver is err, a refusal for the model's window of a request cut to
// level (every level, by then), saying what was cut: the server's words
// alone ("Please reduce the length of the messages") read as if nothing
// had been tried.
func stillOver(err error, msgs []llm.Message, level int) error {
	_, c := cutHistory(msgs, level)
	if c.messages == 0 {
		return fmt.Errorf("%w (refused with no tool output the model had read left to cut: the task, the replies and the tools' definitions are over the model's context window)", err)
	}
	s := "s"
	if c.messages == 1 {
		s = ""
	}
	return fmt.Errorf("%w (refused even with %d tool output%s the model had read cut (%d bytes left out): what is left is over the model's context window)", err, c.messages, s, c.bytes)
}
