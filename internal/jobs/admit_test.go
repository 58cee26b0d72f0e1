package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/natstest"
)

// Config.Admit refuses jobs at the door: dead-lettered with its reason,
// never run; jobs it admits run as usual.
func TestAdmitRejects(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, Admit: func(j *Job) error {
		if strings.Contains(j.Task, "forbidden") {
			return errors.New("tasks may not say forbidden")
		}
		return nil
	}})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for _, j := range []*Job{{ID: "admit-no", Task: "echo:forbidden"}, {ID: "admit-yes", Task: "echo:fine"}} {
		if _, err := c.Submit(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if st := waitStatus(t, c, "admit-no"); st.Status != StatusDead || st.Error != "job rejected: tasks may not say forbidden" {
		t.Errorf("refused job: %s %q", st.Status, st.Error)
	}
	if st := waitStatus(t, c, "admit-yes"); st.Status != StatusSucceeded {
		t.Errorf("admitted job: %s %q", st.Status, st.Error)
	}
	var reasons []string
	for _, m := range streamMsgs(t, nc, c.names.DLQStream(), c.names.DLQSubject(DefaultQueue)) {
		reasons = append(reasons, m.Header.Get("Jetagent-Job-Id")+": "+m.Header.Get("Jetagent-Reason"))
	}
	if strings.Join(reasons, ";") != "admit-no: job rejected: tasks may not say forbidden" {
		t.Errorf("dead letters %q", reasons)
	}
	if n := r.runCount("admit-no"); n != 0 {
		t.Errorf("the refused job ran %d times", n)
	}
}
