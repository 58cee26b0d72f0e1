package reflect

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
)

// bytesource turns fuzz input into choices; exhausted input reads as zeros.
type bytesource struct{ b []byte }

func (s *bytesource) next() byte {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c
}

func (s *bytesource) pick(n int) int { return int(s.next()) % n }

// Small alphabets make collisions (ids, call ids, names) likely.
var (
	fuzzIDs   = []string{"", "a", "b", "c", "d", "a_1", "a_2", "r1", "r2"}
	fuzzNames = []string{"", "call_tool", "execute_code", "read", "write", "weather"}
	fuzzText  = []string{"", "x", `{}`, `{"k":1}`, "not json", "é\x00\n"}
	fuzzRoles = []string{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool}
	fuzzKinds = []string{KindCallTool, KindCode, KindClientTool, ""}
)

// arbitrary builds any transcript and records, well-formed or not.
func arbitrary(data []byte) ([]llm.Message, []Record) {
	s := &bytesource{data}
	msgs := make([]llm.Message, s.pick(8))
	for i := range msgs {
		m := llm.Message{Role: fuzzRoles[s.pick(len(fuzzRoles))], Content: fuzzText[s.pick(len(fuzzText))]}
		switch m.Role {
		case llm.RoleAssistant:
			for range s.pick(4) {
				m.ToolCalls = append(m.ToolCalls, call(fuzzIDs[s.pick(len(fuzzIDs))], fuzzNames[s.pick(len(fuzzNames))], fuzzText[s.pick(len(fuzzText))]))
			}
		case llm.RoleTool:
			m.ToolCallID = fuzzIDs[s.pick(len(fuzzIDs))]
			m.Name = fuzzNames[s.pick(len(fuzzNames))]
		}
		msgs[i] = m
	}
	recs := make([]Record, s.pick(6))
	for i := range recs {
		r := Record{
			ID:     fuzzIDs[s.pick(len(fuzzIDs))],
			CallID: fuzzIDs[s.pick(len(fuzzIDs))],
			Kind:   fuzzKinds[s.pick(len(fuzzKinds))],
			Name:   fuzzNames[s.pick(len(fuzzNames))],
		}
		if in := fuzzText[s.pick(len(fuzzText))]; json.Valid([]byte(in)) {
			r.Input = json.RawMessage(in)
		}
		if s.pick(4) > 0 {
			r.Output = str(fuzzText[s.pick(len(fuzzText))])
		}
		recs[i] = r
	}
	return msgs, recs
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzRewriteIdempotent: any input; Rewrite must not panic, must not modify
// its input, and applying it twice must equal applying it once.
func FuzzRewriteIdempotent(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, recs := arbitrary(data)
		before := jsonOf(t, msgs)
		once := Rewrite(msgs, recs)
		if jsonOf(t, msgs) != before {
			t.Fatalf("input modified")
		}
		if a, b := jsonOf(t, once), jsonOf(t, Rewrite(once, recs)); a != b {
			t.Fatalf("not idempotent\n msgs %s\n recs %s\n once %s\ntwice %s", before, jsonOf(t, recs), a, b)
		}
	})
}

// FuzzRewriteUntouched: messages that mention no id a record could produce
// or replace come out byte-equal and in the same order; inside rewritten
// assistant messages, role, content and such calls are kept in order; and
// every call or result of a call with a payload-less record survives as is.
func FuzzRewriteUntouched(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, recs := arbitrary(data)
		ids := map[string]bool{}
		for _, r := range recs {
			ids[r.ID], ids[r.CallID] = true, true
			for i := range 8 {
				ids[fmt.Sprintf("%s_%d", r.CallID, i+1)] = true
			}
		}
		mentions := func(m llm.Message) bool {
			switch m.Role {
			case llm.RoleTool:
				return ids[m.ToolCallID]
			case llm.RoleAssistant:
				return slices.ContainsFunc(m.ToolCalls, func(c llm.ToolCall) bool { return ids[c.ID] })
			}
			return false
		}
		out := Rewrite(msgs, recs)
		var in1, out1 []string
		for _, m := range msgs {
			if !mentions(m) {
				in1 = append(in1, jsonOf(t, m))
			}
		}
		for _, m := range out {
			if !mentions(m) {
				out1 = append(out1, jsonOf(t, m))
			}
		}
		if !slices.Equal(in1, out1) {
			t.Fatalf("untouched messages changed\n in %q\nout %q", in1, out1)
		}
		// Assistant messages keep their number, role, content and the
		// calls that mention no recorded id.
		var ain, aout []llm.Message
		for _, m := range msgs {
			if m.Role == llm.RoleAssistant {
				ain = append(ain, m)
			}
		}
		for _, m := range out {
			if m.Role == llm.RoleAssistant {
				aout = append(aout, m)
			}
		}
		if len(ain) != len(aout) {
			t.Fatalf("assistant messages: %d in, %d out", len(ain), len(aout))
		}
		plain := func(m llm.Message) (s []string) {
			for _, c := range m.ToolCalls {
				if !ids[c.ID] {
					s = append(s, jsonOf(t, c))
				}
			}
			return s
		}
		for i := range ain {
			if ain[i].Content != aout[i].Content || !slices.Equal(plain(ain[i]), plain(aout[i])) {
				t.Fatalf("assistant message %d changed beyond its reflected calls\n in %s\nout %s", i, jsonOf(t, ain[i]), jsonOf(t, aout[i]))
			}
		}
		// Missing payloads: calls with such a record keep every occurrence.
		incomplete := map[string]bool{}
		for _, r := range recs {
			if r.Name == "" || r.Output == nil {
				incomplete[r.CallID] = true
			}
		}
		bag := func(ms []llm.Message) map[string]int {
			n := map[string]int{}
			for _, m := range ms {
				if m.Role == llm.RoleTool && incomplete[m.ToolCallID] {
					n[jsonOf(t, m)]++
				}
				if m.Role == llm.RoleAssistant {
					for _, c := range m.ToolCalls {
						if incomplete[c.ID] {
							n[jsonOf(t, c)]++
						}
					}
				}
			}
			return n
		}
		have := bag(out)
		for k, n := range bag(msgs) {
			if have[k] < n {
				t.Fatalf("payload-less call lost: %s (%d in, %d out)", k, n, have[k])
			}
		}
	})
}

// FuzzRewriteOrder: well-formed transcripts as the loop writes them (unique
// ids); the result must match a straightforward model exactly: every
// complete group expands in place, in record order, calls and results alike.
func FuzzRewriteOrder(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &bytesource{data}
		var msgs, want []llm.Message
		var recs []Record
		n := 0
		for round := range s.pick(5) {
			msgs = append(msgs, user(fmt.Sprint("u", round)))
			want = append(want, user(fmt.Sprint("u", round)))
			var calls, wcalls []llm.ToolCall
			var res, wres []llm.Message
			for k := range 1 + s.pick(3) {
				cid := fmt.Sprintf("call_%d_%d", round, k)
				kind := []string{"", KindCallTool, KindCode, KindClientTool}[s.pick(4)]
				name := map[string]string{"": "plain", KindCallTool: "call_tool", KindCode: "execute_code", KindClientTool: "weather"}[kind]
				calls = append(calls, call(cid, name, `{"m":1}`))
				res = append(res, result(cid, name, "seen"))
				var group []Record
				switch kind {
				case KindCallTool, KindClientTool:
					group = []Record{{CallID: cid, Kind: kind, Name: "real_" + cid, Input: json.RawMessage(`{"r":1}`)}}
				case KindCode:
					for range s.pick(4) {
						group = append(group, Record{CallID: cid, Kind: kind, Name: fmt.Sprint("inner", n), Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
						n++
					}
				}
				complete := true
				for i := range group {
					group[i].ID = fmt.Sprintf("rec_%s_%d", cid, i)
					if s.pick(5) == 0 {
						complete = false // payload missing
					} else {
						group[i].Output = str(fmt.Sprint("out_", group[i].ID))
					}
				}
				recs = append(recs, group...)
				if len(group) == 0 || !complete {
					wcalls = append(wcalls, calls[len(calls)-1])
					wres = append(wres, res[len(res)-1])
					continue
				}
				for _, r := range group {
					wcalls = append(wcalls, call(r.ID, r.Name, string(r.Input)))
					wres = append(wres, result(r.ID, r.Name, *r.Output))
				}
			}
			msgs = append(msgs, asst("thinking", calls...))
			msgs = append(msgs, res...)
			want = append(want, asst("thinking", wcalls...))
			want = append(want, wres...)
		}
		// Records arrive in invocation order but interleaved across calls of
		// one round; Rewrite must keep the order within each call.
		if s.pick(2) == 1 {
			slices.SortStableFunc(recs, func(a, b Record) int { return int(a.ID[len(a.ID)-1]) - int(b.ID[len(b.ID)-1]) })
		}
		got := Rewrite(msgs, recs)
		if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
			t.Fatalf("order\n got %s\nwant %s", g, w)
		}
	})
}

func addSeeds(f *testing.F) {
	for _, s := range []string{
		"",
		"\x03\x02\x00\x01\x01\x01\x01\x03\x01\x02\x03\x01\x01\x01\x02\x01\x02",
		"\x05\x02\x02\x01\x01\x01\x03\x00\x02\x03\x02\x02\x00\x01\x01\x02\x03\x04\x05\x06",
		"\x07\x03\x03\x03\x01\x02\x03\x02\x05\x04\x05\x01\x01\x01\x01\x01\x01\x01\x01",
		"\x04\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4\xf3\xf2\xf1\xf0",
		"\x02\x01\x01\x02\x02\x02\x03\x03\x03\x00\x00\x00\x01\x01\x01\x01",
	} {
		f.Add([]byte(s))
	}
}
