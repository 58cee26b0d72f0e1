package jobs

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// serversRunner records the servers of each job as the worker decoded it.
type serversRunner struct{ got chan *Job }

func (r serversRunner) Run(_ context.Context, job *Job, _ RunEnv) (*Outcome, error) {
	r.got <- job
	return &Outcome{Result: agentloop.Result{Answer: "ok", Rounds: 1, StopReason: "final_answer", Mode: "full"}}, nil
}

// TestEmptyServersSurviveSubmit: a job's empty servers list means no MCP
// servers, an absent one every server (schemas/job.schema.json). Job's
// omitempty dropped the empty list in Client.Submit and SubmitRaw (which
// re-marshals the job), so a job meant to have none was published without
// the field and the worker gave it every server. The published body and
// the job the worker runs must keep the difference.
func TestEmptyServersSurviveSubmit(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := serversRunner{got: make(chan *Job, 16)}
	startWorker(t, nc, Config{Runner: r, KnownServer: func(n string) bool { return n == "files" }})
	c := newClient(t, nc)
	published := make(chan []byte, 16)
	sub, err := nc.Subscribe(c.names.JobsSubject("*"), func(m *nats.Msg) { published <- m.Data })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // test cleanup
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		job  *Job   // Submit
		raw  string // or SubmitRaw
		want []string
	}{
		{name: "Submit, no servers", job: &Job{ID: "none", Task: "x", Servers: []string{}}, want: []string{}},
		{name: "Submit, every server", job: &Job{ID: "all", Task: "x"}, want: nil},
		{name: "Submit, one server", job: &Job{ID: "one", Task: "x", Servers: []string{"files"}}, want: []string{"files"}},
		{name: "SubmitRaw, no servers", raw: `{"id":"raw-none","task":"x","servers":[]}`, want: []string{}},
		{name: "SubmitRaw, every server", raw: `{"id":"raw-all","task":"x"}`, want: nil},
	}
	// One after the other: each published body and run is the one submitted.
	for _, tt := range tests {
		ctx := natstest.Context(t)
		var rc *Receipt
		if tt.job != nil {
			rc, err = c.Submit(ctx, tt.job)
		} else {
			rc, err = c.SubmitRaw(ctx, []byte(tt.raw))
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var body []byte
		select {
		case body = <-published:
		case <-time.After(waitTimeout):
			t.Fatalf("%s: no job published", tt.name)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatal(err)
		}
		servers, present := fields["servers"]
		if present != (tt.want != nil) || (present && string(servers) != string(mustJSON(tt.want))) {
			t.Errorf("%s: published %s; want servers %q", tt.name, body, tt.want)
		}
		var ran *Job
		select {
		case ran = <-r.got:
		case <-time.After(waitTimeout):
			t.Fatalf("%s: the job did not run", tt.name)
		}
		if ran.ID != rc.ID || (ran.Servers == nil) != (tt.want == nil) || !slices.Equal(ran.Servers, tt.want) {
			t.Errorf("%s: job %s ran with servers %#v; want %#v", tt.name, ran.ID, ran.Servers, tt.want)
		}
		if st := waitStatus(t, c, rc.ID); st.Status != StatusSucceeded {
			t.Errorf("%s: %s (%s)", tt.name, st.Status, st.Error)
		}
	}
}
