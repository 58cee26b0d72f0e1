package codemode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// The wire between a Process runner and its child: one JSON object per
// line each way. The parent sends a childStart, then answers the child's
// requests ("call", "now", "random", "explain") with "result" or "value"
// frames, and may send "cancel" at any time; the child ends with "done".
// While a call runs, the child sends "cancelcall" when its execution was
// stopped, so the Host.Call's context is done as it is in process.

// childStart is the first frame: what to run.
type childStart struct {
	Tools  []Tool      `json:"tools"`
	Code   string      `json:"code"`
	Limits childLimits `json:"limits"`
}

// childLimits are Limits' exported fields (the others are for tests of
// the in-process runner).
type childLimits struct {
	WallTime      time.Duration `json:"wall_time"`
	MaxCalls      int           `json:"max_calls"`
	MaxOutput     int           `json:"max_output"`
	MaxStackDepth int           `json:"max_stack_depth"`
	MaxMemory     int64         `json:"max_memory"`
	MaxCode       int           `json:"max_code"`
	MaxValues     int           `json:"max_values"`
	Grace         time.Duration `json:"grace,omitempty"` // Limits.grace: tests lengthen it
}

func exportLimits(l Limits) childLimits {
	return childLimits{l.WallTime, l.MaxCalls, l.MaxOutput, l.MaxStackDepth, l.MaxMemory, l.MaxCode, l.MaxValues, l.grace}
}

func (l childLimits) limits() Limits {
	return Limits{WallTime: l.WallTime, MaxCalls: l.MaxCalls, MaxOutput: l.MaxOutput, MaxStackDepth: l.MaxStackDepth,
		MaxMemory: l.MaxMemory, MaxCode: l.MaxCode, MaxValues: l.MaxValues, grace: l.Grace}
}

// frame is every other message, its fields by Op.
type frame struct {
	Op     string          `json:"op"`
	Seq    int             `json:"seq,omitempty"`    // call, now, random
	Name   string          `json:"name,omitempty"`   // call, explain
	Args   json.RawMessage `json:"args,omitempty"`   // call
	Result *Result         `json:"result,omitempty"` // result
	Error  string          `json:"error,omitempty"`  // result (a refusal), cancel (the cause)
	Abort  bool            `json:"abort,omitempty"`  // result: the refusal ends the execution
	Now    int64           `json:"now,omitempty"`    // value
	Random float64         `json:"random,omitempty"` // value
	Text   string          `json:"text,omitempty"`   // value (explain), done
	Calls  int             `json:"calls,omitempty"`  // done
	Err    *childErr       `json:"err,omitempty"`    // done
}

// childErr is Output.Err on the wire.
type childErr struct {
	Kind    string `json:"kind"` // limit, abort, cancel or error
	Limit   string `json:"limit,omitempty"`
	Message string `json:"message"`
}

// errFrameTooLarge: a child's frame over the reader's limit.
var errFrameTooLarge = errors.New("the code's process sent a message over the size limit")

// marshalFrame encodes v for the wire without encoding/json's escapes of
// <, >, & and U+2028/9, which it applies to json.RawMessage fields too: a
// call's arguments must reach the Host byte for byte, as in process.
func marshalFrame(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func writeFrame(w io.Writer, b []byte) error {
	_, err := w.Write(append(b, '\n'))
	return err
}

// readFrame reads one line of at most limit bytes and decodes it.
func readFrame(r *bufio.Reader, limit int) (frame, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return frame{}, fmt.Errorf("%w (%d bytes)", errFrameTooLarge, limit)
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return frame{}, err // io.EOF also after a part of a line: the child died writing it
		}
	}
	var f frame
	if err := json.Unmarshal(line, &f); err != nil {
		return frame{}, fmt.Errorf("a message of the code's process is not JSON: %w", err)
	}
	return f, nil
}
