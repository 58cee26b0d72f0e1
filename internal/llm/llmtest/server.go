package llmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/llm"
)

// DefaultModel is the model name the server reports when a request names none.
const DefaultModel = "llmtest-scripted"

// Reply is one scripted answer to a chat-completions request.
type Reply struct {
	// Content is the assistant text. For a non-200 Status it is the error
	// message (default "llmtest: scripted error <status>").
	Content string
	// ToolCalls are returned as the assistant's tool_calls. Empty IDs are
	// filled with "call_<request>_<index>", an empty Type with "function".
	ToolCalls []llm.ToolCall
	// FinishReason defaults to "tool_calls" when ToolCalls is set, else "stop".
	FinishReason string
	// Status other than 0 or 200 makes this an error reply.
	Status int
	// Header is set on the response (e.g. "Retry-After": "1").
	Header map[string]string
	// Body, if set, is sent verbatim instead of the generated JSON.
	Body string
	// Usage overrides the default estimate (about 4 bytes per token).
	Usage *llm.Usage
	// Block, if non-nil, holds the reply until it is closed, the client goes
	// away or the server closes: a way to test timeouts and cancellation.
	Block <-chan struct{}
}

// Script configures a server started with [Start].
type Script struct {
	// Model is reported when a request names no model (default DefaultModel).
	Model string
	// Replies are answered in order.
	Replies []Reply
	// Handler answers once Replies are used up (see Server.Handle).
	Handler func(RecordedRequest) Reply
}

// RecordedRequest is one chat-completions request as the server received it.
type RecordedRequest struct {
	// N is the 1-based request number.
	N int
	// Raw is the request body exactly as sent.
	Raw      []byte
	Model    string
	Messages []llm.Message
	Tools    []llm.Tool
	// ToolsJSON is the "tools" value exactly as sent (nil when absent), for
	// byte-identity assertions across requests.
	ToolsJSON  []byte
	ToolChoice any
	Header     http.Header
}

// Server is a running scripted model. Its methods are safe for concurrent use.
type Server struct {
	srv   *httptest.Server
	model string
	done  chan struct{}
	close sync.Once

	mu       sync.Mutex
	queue    []Reply
	handler  func(RecordedRequest) Reply
	requests []RecordedRequest
	arrived  chan struct{} // closed and replaced on every recorded request
}

// NewServer starts a server answering replies in order and closes it when
// the test ends.
func NewServer(t testing.TB, replies ...Reply) *Server {
	t.Helper()
	s, err := Start(Script{Replies: replies})
	if err != nil {
		t.Fatalf("llmtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start runs a scripted model outside tests (the demo). Call Close when done.
func Start(script Script) (*Server, error) {
	s := &Server{
		model:   script.Model,
		done:    make(chan struct{}),
		queue:   append([]Reply(nil), script.Replies...),
		handler: script.Handler,
		arrived: make(chan struct{}),
	}
	if s.model == "" {
		s.model = DefaultModel
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("llmtest: listen: %w", err)
	}
	// Built by hand rather than httptest.NewServer, which panics on a failed listen.
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(s.serveHTTP)}}
	s.srv.Start()
	return s, nil
}

// Close stops the server, releasing replies still blocked.
func (s *Server) Close() {
	s.close.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

// URL is the base URL for clients, ending in "/v1" (no trailing slash).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Push queues more replies after those already queued.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	s.queue = append(s.queue, replies...)
	s.mu.Unlock()
}

// Handle sets a handler that answers when the queue is empty.
func (s *Server) Handle(h func(req RecordedRequest) Reply) {
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
}

// Pending reports how many queued replies are not yet used.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns every chat-completions request received so far, in order.
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RecordedRequest(nil), s.requests...)
}

// WaitRequests blocks until at least n requests have arrived or ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := len(s.requests), s.arrived
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("llmtest: waiting for %d requests, got %d: %w", n, got, ctx.Err())
		}
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("llmtest: no route for %s %s (want POST /v1/chat/completions)", r.Method, r.URL.Path))
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "llmtest: reading body: "+err.Error())
		return
	}
	rec, stream, decodeErr := decodeRequest(raw, r.Header)

	s.mu.Lock()
	rec.N = len(s.requests) + 1
	s.requests = append(s.requests, rec)
	close(s.arrived)
	s.arrived = make(chan struct{})
	var (
		reply    Reply
		scripted = true
	)
	if len(s.queue) > 0 {
		reply, s.queue = s.queue[0], s.queue[1:]
	} else if h := s.handler; h != nil {
		s.mu.Unlock()
		reply = h(rec)
		s.mu.Lock()
	} else {
		scripted = false
	}
	s.mu.Unlock()

	switch {
	case decodeErr != nil:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("llmtest: request %d: %v", rec.N, decodeErr))
		return
	case stream:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("llmtest: request %d: stream:true is not supported", rec.N))
		return
	case !scripted:
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("llmtest: no reply scripted for request %d", rec.N))
		return
	}

	if reply.Block != nil {
		select {
		case <-reply.Block:
		case <-r.Context().Done():
			return
		case <-s.done:
			writeError(w, http.StatusServiceUnavailable, "llmtest: server closed")
			return
		}
	}
	s.writeReply(w, rec, reply)
}

func (s *Server) writeReply(w http.ResponseWriter, rec RecordedRequest, reply Reply) {
	for k, v := range reply.Header {
		w.Header().Set(k, v)
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	if reply.Body != "" {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	if status != http.StatusOK {
		msg := reply.Content
		if msg == "" {
			msg = fmt.Sprintf("llmtest: scripted error %d", status)
		}
		writeError(w, status, msg)
		return
	}

	calls := make([]llm.ToolCall, len(reply.ToolCalls))
	for i, c := range reply.ToolCalls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d_%d", rec.N, i)
		}
		if c.Type == "" {
			c.Type = "function"
		}
		calls[i] = c
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	model := rec.Model
	if model == "" {
		model = s.model
	}
	var usage llm.Usage
	if reply.Usage != nil {
		usage = *reply.Usage
	} else {
		out := len(reply.Content)
		for _, c := range calls {
			out += len(c.Function.Name) + len(c.Function.Arguments)
		}
		usage = llm.Usage{PromptTokens: int64(len(rec.Raw)+3) / 4, CompletionTokens: int64(out+3) / 4}
	}

	msg := map[string]any{"role": llm.RoleAssistant, "content": reply.Content}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
		if reply.Content == "" {
			msg["content"] = nil
		}
	}
	usageJSON := map[string]any{
		"prompt_tokens":     usage.PromptTokens,
		"completion_tokens": usage.CompletionTokens,
		"total_tokens":      usage.PromptTokens + usage.CompletionTokens,
	}
	if usage.CachedPromptTokens > 0 {
		usageJSON["prompt_tokens_details"] = map[string]any{"cached_tokens": usage.CachedPromptTokens}
	}
	body := map[string]any{
		"id":      fmt.Sprintf("chatcmpl-llmtest-%d", rec.N),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"finish_reason": finish,
			"logprobs":      nil,
		}},
		"usage": usageJSON,
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// writeError answers with the OpenAI error shape {"error":{"message",...}}.
func writeError(w http.ResponseWriter, status int, msg string) {
	typ := "server_error"
	if status < 500 {
		typ = "invalid_request_error"
	}
	if status == http.StatusTooManyRequests {
		typ = "rate_limit_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": strconv.Itoa(status),
	}})
}

// wireRequest is the part of a chat-completions body the server decodes.
type wireRequest struct {
	Model      string          `json:"model"`
	Messages   []wireMessage   `json:"messages"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice any             `json:"tool_choice"`
	Stream     bool            `json:"stream"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []llm.ToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`

	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ReasoningDetails json.RawMessage `json:"reasoning_details"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func decodeRequest(raw []byte, h http.Header) (RecordedRequest, bool, error) {
	rec := RecordedRequest{Raw: raw, Header: h.Clone()}
	var wr wireRequest
	if err := json.Unmarshal(raw, &wr); err != nil {
		return rec, false, fmt.Errorf("body is not a JSON object: %w", err)
	}
	rec.Model = wr.Model
	rec.ToolChoice = wr.ToolChoice
	for i, m := range wr.Messages {
		content, err := decodeContent(m.Content)
		if err != nil {
			return rec, wr.Stream, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		rec.Messages = append(rec.Messages, llm.Message{
			Role: m.Role, Content: content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name,
			ReasoningContent: m.ReasoningContent, Reasoning: m.Reasoning, ReasoningDetails: m.ReasoningDetails,
		})
	}
	if len(wr.Tools) > 0 && !bytes.Equal(wr.Tools, []byte("null")) {
		rec.ToolsJSON = []byte(wr.Tools)
		var tools []wireTool
		if err := json.Unmarshal(wr.Tools, &tools); err != nil {
			return rec, wr.Stream, fmt.Errorf("tools: %w", err)
		}
		for _, t := range tools {
			rec.Tools = append(rec.Tools, llm.Tool{
				Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters,
			})
		}
	}
	return rec, wr.Stream, nil
}

// decodeContent accepts a string, null, or an array of content parts (whose
// text parts are concatenated).
func decodeContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}
