package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestDoorRoughEdges: what the worker says about jobs it does not take as
// given. An empty body is called empty (not "EOF"); a body naming another
// queue than the subject it came on is refused, naming both; a max_rounds
// above the cap and a timeout of 0s run with what applies, and the started
// event says what that is, and which allow and deny globs match no tool.
func TestDoorRoughEdges(t *testing.T) {
	h := startWorker(t)
	js, err := h.nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	dead := []struct {
		name, id string
		body     string
		want     string
	}{
		{"empty body", "", "", "job is not JSON: the body is empty"},
		{"white space", "", " \n", "job is not JSON: the body is empty (2 bytes of white space)"},
		{"queue in the body differs", "wrong-queue", `{"id":"wrong-queue","task":"add 1 2","queue":"other"}`,
			`job names another queue than the one it was published on: its queue is "other" but it was published on ` +
				`agent.jobs.default (queue "default"): publish it on agent.jobs.other, or leave the queue field out`},
	}
	// The dead letters, matched to their jobs by stream sequence (a job
	// published without an id is named by the worker).
	dlq, err := h.nc.SubscribeSync("agent.dlq.default")
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Unsubscribe() //nolint:errcheck
	reasons := map[string]string{}
	reasonOf := func(ctx context.Context, seq uint64) string {
		t.Helper()
		key := fmt.Sprint(seq)
		for reasons[key] == "" {
			m, err := dlq.NextMsgWithContext(ctx)
			if err != nil {
				t.Fatalf("dead letter of stream sequence %d: %v", seq, err)
			}
			reasons[m.Header.Get("Jetagent-Stream-Seq")] = m.Header.Get("Jetagent-Reason")
		}
		return reasons[key]
	}
	for _, tt := range dead {
		t.Run(tt.name, func(t *testing.T) {
			ctx := natstest.Context(t)
			m := nats.NewMsg("agent.jobs.default")
			m.Data = []byte(tt.body)
			ack, err := js.PublishMsg(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := reasonOf(ctx, ack.Sequence); got != tt.want {
				t.Errorf("dead letter reason %q, want %q", got, tt.want)
			}
			if tt.id == "" {
				return
			}
			st, err := h.client.Wait(ctx, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != jobs.StatusDead || st.Error != tt.want {
				t.Errorf("state %s %q, want dead %q", st.Status, st.Error, tt.want)
			}
		})
	}

	t.Run("settings not applied as given", func(t *testing.T) {
		ctx := natstest.Context(t)
		rc, err := h.client.Submit(ctx, &jobs.Job{Task: "add 2 2", Servers: []string{"demo"}, MaxRounds: 1000, Timeout: "0s",
			Allow: []string{"ad*", "ad"}, Deny: []string{"get_wether", "zzz*"}})
		if err != nil {
			t.Fatal(err)
		}
		var started map[string]any
		st, err := h.client.Watch(ctx, rc.ID, func(ev jobs.Event) {
			if ev.Type == jobs.EventStarted {
				_ = json.Unmarshal(ev.Data, &started)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusSucceeded {
			t.Fatalf("state %+v", st)
		}
		notes := fmt.Sprint(started["notes"])
		for _, want := range []string{
			`timeout "0s" is not positive: the worker's default 10m0s applies`,
			"max_rounds 1000 is above the cap 50 (JETAGENT_MAX_ROUNDS_CAP): at most 50 rounds apply",
			`allow "ad" matches no tool of the job (did you mean "add"?)`,
			`deny "get_wether" matches no tool of the job (did you mean "get_weather"?)`,
			`deny "zzz*" matches no tool of the job`,
		} {
			if !strings.Contains(notes, want) {
				t.Errorf("started notes %s lack %q", notes, want)
			}
		}
		if strings.Contains(notes, `"ad*"`) {
			t.Errorf("a glob that matches was noted: %s", notes)
		}
		if started["timeout_ms"] != float64(600000) {
			t.Errorf("timeout_ms %v", started["timeout_ms"])
		}
	})

	// A job naming no servers is sent the tools worker tools counts: the
	// example server's tools and the loop's resource bridge (its server
	// lists a resource), with the same tokens.
	t.Run("worker tools counts what a job is sent", func(t *testing.T) {
		ctx := natstest.Context(t)
		rc, err := h.client.Submit(ctx, &jobs.Job{Task: "add 1 1", ToolMode: "full"})
		if err != nil {
			t.Fatal(err)
		}
		var request map[string]any
		if _, err := h.client.Watch(ctx, rc.ID, func(ev jobs.Event) {
			if ev.Type == "llm.request" && request == nil {
				_ = json.Unmarshal(ev.Data, &request)
			}
		}); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{"tools", "-markdown"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var total []string
		for _, l := range strings.Split(stdout.String(), "\n") {
			if strings.HasPrefix(l, "| total") {
				total = strings.Split(l, " | ")
			}
		}
		if !strings.Contains(stdout.String(), "| resource bridge | 2 |") || len(total) < 3 {
			t.Fatalf("tools output:\n%s", stdout.String())
		}
		want := fmt.Sprintf("%v %v", request["tool_count"], request["tool_def_tokens"])
		t.Logf("tools total %s/%s, request %s", total[1], total[2], want)
		if got := total[1] + " " + total[2]; got != want {
			t.Errorf("worker tools total: %s tools, tokens; the job's request: %s\n%s", got, want, stdout.String())
		}
	})
}
