package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/schemas"
)

// jobSeeds are job bodies of every shape the door sees: minimal, full,
// continuations with history, client tools, and near misses of each.
var jobSeeds = []string{
	`{"task":"x"}`,
	`{"id":"j-1","task":"add 2 3","queue":"default","tool_mode":"full","servers":["demo"],"allow":["add"],"deny":["write_*"],"max_rounds":3,"timeout":"90s","metadata":{"k":"v"}}`,
	`{"task":"again","history":[{"role":"user","content":"add 2 3"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":2}"}}]},{"role":"tool","tool_call_id":"c1","name":"add","content":"5"}]}`,
	`{"task":"t","client_tools":[{"name":"ask","description":"d","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}],"client_secret":"0123456789abcdef0123456789abcdef"}`,
	`{"task":"t","system":"s","model":"m","timeout":"1h2m3.5s"}`,
	`{"task":""}`, `{}`, `[]`, `null`, `"task"`, ``, `   `, `{"task":"x","extra":1}`,
	`{"task":"x","id":"_seq-1"}`, `{"task":"x","max_rounds":0}`, `{"task":"x","max_rounds":1.0}`,
	`{"task":"x","timeout":"5"}`, `{"task":"x","client_tools":[]}`, `{"task":"x","servers":["a","a"]}`,
	`{"task":"x","history":[{"role":"user","content":"hi","ROLE":"bogus"}]}`,
	`{"task":"x","history":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}]}`,
	`{"task":"\u0000\ud800","metadata":{"":""}}`, `{"task":"x"}{"task":"y"}`, `{"task":"x","task":""}`,
}

// FuzzDecodeJob: whatever the bytes, the door's decoder does not panic; it
// refuses with one of its three errors or accepts a job with a task; and
// an accepted job round-trips: marshalled again (as Client.Submit and
// SubmitRaw do) it is accepted again and decodes to the same job.
func FuzzDecodeJob(f *testing.F) {
	for _, s := range jobSeeds {
		f.Add([]byte(s))
	}
	v, err := NewValidator(64 << 10)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := v.DecodeJob(data)
		if err != nil {
			if j != nil {
				t.Fatalf("job %+v with error %v", j, err)
			}
			if !errors.Is(err, ErrSchema) && !errors.Is(err, ErrNotJSON) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps none of ErrSchema, ErrNotJSON, ErrTooLarge", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("reason %q spans lines (it goes into a header)", err)
			}
			if len(data) <= v.MaxJobBytes() && v.Validate(schemas.Job, data) == nil && !errors.Is(err, errBeyondSchema) {
				// The schema passed and the Go decoder refused: the door
				// gives a reason in Go's words, not the schema's. (The
				// door's own checks beyond the schema, errBeyondSchema,
				// refuse on purpose: duplicate names, bad UTF-8, a blank task.)
				t.Fatalf("the schema accepts %q but DecodeJob refuses it: %v", data, err)
			}
			return
		}
		if j == nil || j.Task == "" {
			t.Fatalf("accepted %q as %+v", data, j)
		}
		if _, err := j.TimeoutDuration(); err != nil {
			t.Fatalf("accepted timeout %q: %v", j.Timeout, err)
		}
		_ = CheckQueue(j, DefaultQueue, Names{Prefix: DefaultPrefix})
		_ = CheckServers(j, func(string) bool { return true })
		once, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		j2, err := v.DecodeJob(once)
		if err != nil {
			t.Fatalf("accepted %s\nbut not once re-encoded: %s\n%v", data, once, err)
		}
		twice, err := json.Marshal(j2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("round trip changed the job:\n%s\n%s", once, twice)
		}
	})
}

// TestDecodeJobAgreesWithTheSchema: what the job schema accepts, DecodeJob
// accepts, and a job it accepts is accepted again once re-encoded (what
// Client.SubmitRaw does: DecodeJob, then Submit marshals and decodes).
func TestDecodeJobAgreesWithTheSchema(t *testing.T) {
	v, err := NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"task":"x","max_rounds":1.0}`,
		`{"task":"x","max_rounds":1e2}`,
		`{"task":"x","history":[{"role":"user","content":"hi","ROLE":"bogus"}]}`,
		`{"task":"x","history":[{"role":"user","Content":5}]}`,
		`{"task":"x","history":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}]}`,
	} {
		schemaErr := v.Validate(schemas.Job, []byte(body))
		j, err := v.DecodeJob([]byte(body))
		if (schemaErr == nil) != (err == nil) {
			t.Errorf("%s: schema says %v, DecodeJob says %v", body, schemaErr, err)
			continue
		}
		if err != nil {
			continue
		}
		again, _ := json.Marshal(j)
		if _, err := v.DecodeJob(again); err != nil {
			t.Errorf("%s accepted, re-encoded as %s refused: %v", body, again, err)
		}
	}
}
