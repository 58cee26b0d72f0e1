package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
)

// oneLine flattens s and cuts it to n runes.
func oneLine(s string, n int) string {
	s = shown(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// shown is s as a terminal may be sent it: what a tool, a model or a
// refused id says reaches the terminal through here. Control characters
// (ESC of a sequence that would retitle the window or hide lines, a CR
// that overwrites the line) and bidirectional controls (U+202E and the
// like reorder the text after them, Trojan Source style: an answer or a
// tool's output read otherwise than it is) are shown as U+FFFD, not sent;
// worker tools escapes the same runes. Newlines and tabs are kept, and a
// CRLF line end (a Windows tool's output) is a newline: its CR overwrites
// nothing, and every line of such an output ended in U+FFFD.
func shown(s string) string {
	if !strings.ContainsFunc(s, obeyed) {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Map(func(r rune) rune {
		if obeyed(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

// obeyed: a terminal acts on r rather than showing it.
func obeyed(r rune) bool {
	return (unicode.IsControl(r) && r != '\n' && r != '\t') || unicode.Is(unicode.Bidi_Control, r)
}

// formatEvent renders an event as one readable line.
func formatEvent(ev jobs.Event) string {
	var d map[string]any
	// Numbers as written: decoded as float64 and printed with %v, a count
	// of a million read 1e+06 ("137+1.25e+06 tokens").
	dec := json.NewDecoder(bytes.NewReader(ev.Data))
	dec.UseNumber()
	_ = dec.Decode(&d)
	get := func(k string) any { return d[k] }
	str := func(k string) string {
		if v, ok := d[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	}
	round := ""
	if ev.Round > 0 && ev.Type != "loop.outcome" { // its Round counts the completed tool rounds, which the line says
		round = fmt.Sprintf("round %d: ", ev.Round)
	}
	var what string
	switch ev.Type {
	case jobs.EventStarted:
		what = fmt.Sprintf("attempt %d on worker %s", ev.Attempt, ev.Worker)
		if notes, ok := d["notes"].([]any); ok { // settings not applied as the job gave them
			for _, n := range notes {
				what += fmt.Sprintf("; note: %v", n)
			}
		}
	case "llm.request":
		what = fmt.Sprintf("asking the model (%v messages, %v tools = %v tokens, %s mode)",
			get("message_count"), get("tool_count"), get("tool_def_tokens"), str("mode"))
	case "llm.response":
		what = fmt.Sprintf("%s, %v+%v tokens", str("finish_reason"), get("prompt_tokens"), get("completion_tokens"))
		if n := str("tool_calls"); n != "" && n != "0" {
			what += ", " + n + " tool calls"
		}
	case "tool.call":
		what = fmt.Sprintf("%s(%s)", str("name"), oneLine(str("arguments"), 160))
	case "tool.result":
		name := str("name")
		if t := str("tool"); t != "" && t != name {
			name += " → " + t
		}
		if e := str("error"); e != "" && e != "false" {
			what = fmt.Sprintf("%s failed: %s", name, oneLine(str("output"), 200))
		} else {
			what = fmt.Sprintf("%s → %s (%vms)", name, oneLine(str("output"), 200), get("duration_ms"))
		}
	case "tool.progress": // a server's report on a call in progress
		what = str("name") + ": " + str("progress")
		if t := str("total"); t != "" {
			what += "/" + t
		}
		if m := str("message"); m != "" {
			what += " " + oneLine(m, 160)
		}
	case "context.compacted": // the model's window was full
		what = fmt.Sprintf("the model's context window was full: %v tool outputs cut (%v bytes; level %v)",
			get("cut_outputs"), get("cut_bytes"), get("level"))
	case "tool.clash": // a client tool named like a tool of the job's servers
		what = fmt.Sprintf("%s: %s's tool is used, the client tool of that name is left out", str("name"), str("server"))
	case "tool.validation_failed":
		what = fmt.Sprintf("%s: invalid arguments: %v", str("name"), get("errors"))
	case "loop.outcome":
		what = fmt.Sprintf("%s after %v tool rounds, %v prompt + %v completion tokens", str("stop_reason"), get("rounds"),
			get("prompt_tokens"), get("completion_tokens"))
		if e := str("error"); e != "" {
			what += ": " + e
		}
	case jobs.EventRetry, jobs.EventRequeued:
		what = fmt.Sprintf("%s; again in %vms", str("reason"), get("delay_ms"))
	case jobs.EventSucceeded:
		what = "done"
	case jobs.EventFailed, jobs.EventCancelled, jobs.EventDead:
		what = str("error")
	default:
		what = oneLine(string(ev.Data), 200)
	}
	if ref, ok := jobs.EventDataRef(ev); ok {
		what += truncatedMark(ref)
	} else if jobs.TerminalEvent(ev.Type) {
		var res jobs.Result
		if json.Unmarshal(ev.Data, &res) == nil && res.ErrorRef != nil && ev.Type != jobs.EventSucceeded {
			what += truncatedMark(*res.ErrorRef)
		}
	}
	// The event's fields outside oneLine (a tool's name, a job's error)
	// come from tools, models and workers too.
	return shown(fmt.Sprintf("%s  %-16s %s%s", ev.Time.Local().Format("15:04:05"), ev.Type, round, what))
}

// truncatedMark says that a line shows only the start of something stored
// in full elsewhere (submit --json prints it whole).
func truncatedMark(ref jobs.DataRef) string {
	return fmt.Sprintf(" … (truncated; %d bytes in %s/%s)", ref.Bytes, ref.Bucket, ref.Name)
}

// writeTranscript renders a transcript for reading (--json prints it as
// stored).
func writeTranscript(w io.Writer, t *jobs.Transcript) {
	kind := "reflected"
	if !t.Reflected {
		kind = "raw"
	}
	fmt.Fprintf(w, "# job %s (%s transcript): %s mode, %d tool rounds, %s, %d prompt + %d completion tokens\n\n",
		t.JobID, kind, t.Mode, t.Rounds, t.StopReason, t.Usage.PromptTokens, t.Usage.CompletionTokens)
	for _, m := range t.Messages {
		switch m.Role {
		case llm.RoleTool:
			name := m.Name
			if name == "" {
				name = m.ToolCallID
			}
			fmt.Fprintf(w, "tool %s: %s\n", shown(name), shown(m.Content))
		default:
			if m.Content != "" {
				fmt.Fprintf(w, "%s: %s\n", m.Role, shown(m.Content))
			}
			for _, tc := range m.ToolCalls {
				fmt.Fprintf(w, "%s → %s(%s)\n", m.Role, shown(tc.Function.Name), shown(tc.Function.Arguments))
			}
		}
	}
}
