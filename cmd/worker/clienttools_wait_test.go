package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// askModel calls the client tool named by a task "ask:NAME", then answers
// "got: " and the tool result.
func askModel(req llmtest.RecordedRequest) llmtest.Reply {
	for _, m := range afterLastUser(req.Messages) {
		if m.Role == llm.RoleTool {
			return llmtest.Reply{Content: "got: " + m.Content}
		}
	}
	name, ok := strings.CutPrefix(lastUser(req.Messages), "ask:")
	if !ok {
		return llmtest.Reply{Content: "nothing to ask"}
	}
	return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: name, Arguments: `{"question":"ready?"}`}}}}
}

var askSchema = json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`)

// clientJob is a job declaring one client tool, with a fresh secret.
func clientJob(t *testing.T, id, tool string) *jobs.Job {
	t.Helper()
	secret, err := clienttools.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return &jobs.Job{ID: id, Task: "ask:" + tool, Servers: []string{}, ClientSecret: secret,
		ClientTools: []clienttools.Decl{{Name: tool, Description: "Ask the person at the keyboard.", InputSchema: askSchema}}}
}

// serveClient answers the job's client tools with h (the submitter's side,
// as submit runs it) until the test ends.
func serveClient(t *testing.T, ctx context.Context, nc *nats.Conn, job *jobs.Job, h clienttools.Handler) {
	t.Helper()
	stop, err := clienttools.Serve(ctx, nc, job.ID, job.ClientSecret, h, clienttools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// TestClientToolWait: while a client tool waits for the submitter, the job
// keeps heartbeating (no redelivery however long past the ack wait it
// waits) and only an authentic answer ends the wait; no answer in time is a
// clear tool error the model sees, not a hang.
func TestClientToolWait(t *testing.T) {
	t.Run("heartbeat while waiting, forged answers ignored", func(t *testing.T) {
		// Each case has its worker. With one, the client tool timeout (4 s)
		// had to outlast this case's heartbeat watch (1.5 ack waits) and
		// the checks after it, or the tool failed before the release: a
		// race with the machine's speed. Here the client tool waits as long
		// as the case does (ctx), and the ack wait is 3 s, not 1 s: the
		// server redelivers once no heartbeat came for the ack wait, so a
		// stall of under a second of the worker's heartbeat ticker (a busy
		// machine, -race) failed the case with a redelivery no code caused.
		const ackWait = 3 * time.Second
		h := startClientWorker(t, askModel, map[string]string{
			"JETAGENT_ACK_WAIT":            ackWait.String(),
			"JETAGENT_HEARTBEAT":           "200ms",
			"JETAGENT_CLIENT_TOOL_TIMEOUT": "10m",
		})
		ctx := natstest.Context(t)
		job := clientJob(t, "wait-heartbeat", "ask_user")
		asked, release := make(chan struct{}), make(chan struct{})
		serveClient(t, ctx, h.nc, job, func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
			close(asked)
			select {
			case <-release:
				return "genuine", false, nil
			case <-ctx.Done():
				return "", true, ctx.Err()
			}
		})
		// Someone who sees the request answers at once, without the secret.
		rogue, err := nats.Connect(h.natsURL)
		if err != nil {
			t.Fatal(err)
		}
		defer rogue.Close()
		forged := make(chan struct{}, 4)
		if _, err := rogue.Subscribe("agent.client."+job.ID, func(m *nats.Msg) {
			var req clienttools.Request
			_ = json.Unmarshal(m.Data, &req)
			a := clienttools.Answer{V: clienttools.WireVersion, ID: req.ID, Output: "forged"}
			a.Sign(strings.Repeat("k", 43))
			b, _ := json.Marshal(a)
			_ = m.Respond(b)
			forged <- struct{}{}
		}); err != nil {
			t.Fatal(err)
		}
		if err := rogue.Flush(); err != nil {
			t.Fatal(err)
		}
		// In-progress acks of the job's message (the heartbeat).
		wpi := make(chan struct{}, 1024)
		acks, err := h.nc.Subscribe("$JS.ACK.AGENT_JOBS.>", func(m *nats.Msg) {
			if string(m.Data) == "+WPI" {
				wpi <- struct{}{}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer acks.Unsubscribe() //nolint:errcheck
		if err := h.nc.Flush(); err != nil {
			t.Fatal(err)
		}

		if _, err := h.client.Submit(ctx, job); err != nil {
			t.Fatal(err)
		}
		recvCtx(t, ctx, asked)
		recvCtx(t, ctx, forged)
		// Wait, on heartbeats, until well past the ack wait.
		since, beats := time.Now(), 0
		for time.Since(since) < ackWait*3/2 {
			recvCtx(t, ctx, wpi)
			beats++
		}
		st, err := h.client.Status(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusRunning || st.Attempt != 1 {
			t.Errorf("state while waiting %s attempt %d", st.Status, st.Attempt)
		}
		js, _ := jetstream.New(h.nc)
		cons, err := js.Consumer(ctx, "AGENT_JOBS", consumerOf(t, ctx, js))
		if err != nil {
			t.Fatal(err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ci.NumRedelivered != 0 || ci.NumAckPending != 1 {
			t.Errorf("after %d heartbeats: redelivered %d, ack pending %d", beats, ci.NumRedelivered, ci.NumAckPending)
		}

		close(release)
		st, err = h.client.Wait(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusSucceeded || st.Attempt != 1 || st.Result.Answer != "got: genuine" {
			t.Fatalf("state %+v result %+v", st, st.Result)
		}
	})

	t.Run("no answer in time is a tool error", func(t *testing.T) {
		h := startClientWorker(t, askModel, map[string]string{"JETAGENT_CLIENT_TOOL_TIMEOUT": "4s"})
		ctx := natstest.Context(t)
		job := clientJob(t, "wait-silent", "ask_user")
		asked := make(chan struct{})
		serveClient(t, ctx, h.nc, job, func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
			close(asked)
			<-ctx.Done() // never answers before the worker gives up
			return "", true, ctx.Err()
		})
		if _, err := h.client.Submit(ctx, job); err != nil {
			t.Fatal(err)
		}
		recvCtx(t, ctx, asked)
		st, err := h.client.Wait(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := `Error: client tool "ask_user": client tool: no answer from the submitter in time after 4s (the submitter did not answer; it may have run the tool: whether it did is unknown)`
		if st.Status != jobs.StatusSucceeded || st.Result.Answer != "got: "+want {
			t.Fatalf("state %s, answer %q\nwant %q", st.Status, st.Result.Answer, "got: "+want)
		}
		var sawError bool
		for _, ev := range h.events(t, ctx, job.ID) {
			if ev.Type == "tool.result" {
				var d struct {
					Name   string
					Error  bool
					Output string
				}
				_ = json.Unmarshal(ev.Data, &d)
				sawError = d.Name == "ask_user" && d.Error && d.Output == want
			}
		}
		if !sawError {
			t.Error("no tool.result event with the error")
		}
	})
}

// consumerOf is the name of the jobs stream's only consumer.
func consumerOf(t *testing.T, ctx context.Context, js jetstream.JetStream) string {
	t.Helper()
	s, err := js.Stream(ctx, "AGENT_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	names := s.ConsumerNames(ctx)
	var all []string
	for n := range names.Name() {
		all = append(all, n)
	}
	if len(all) != 1 {
		t.Fatalf("consumers %v (%v)", all, names.Err())
	}
	return all[0]
}

func recvCtx[T any](t *testing.T, ctx context.Context, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting: %v", ctx.Err())
	}
	var zero T
	return zero
}

// TestClientToolDeclarationsAtTheDoor: a job whose client tool declarations
// break the limits (or do not compile) is dead-lettered with the reason
// before it runs; the model is never asked.
func TestClientToolDeclarationsAtTheDoor(t *testing.T) {
	h := startClientWorker(t, askModel, nil)
	tests := []struct {
		name  string
		tools []clienttools.Decl
		want  string
	}{
		{"one too large", []clienttools.Decl{{Name: "big", Description: strings.Repeat("d", 20<<10), InputSchema: askSchema}},
			`client tool "big": 20` /* bytes */},
		{"schema does not compile", []clienttools.Decl{{Name: "bad", InputSchema: json.RawMessage(`{"type":"nope"}`)}},
			`client tool "bad": input_schema`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := natstest.Context(t)
			job := clientJob(t, "door-"+strings.ReplaceAll(tt.name, " ", "-"), "ask_user")
			job.ClientTools = tt.tools
			if _, err := h.client.Submit(ctx, job); err != nil {
				t.Fatal(err)
			}
			st, err := h.client.Wait(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != jobs.StatusDead || !strings.HasPrefix(st.Error, "job rejected: client tool: invalid declaration: ") || !strings.Contains(st.Error, tt.want) {
				t.Fatalf("state %s error %q, want dead naming %q", st.Status, st.Error, tt.want)
			}
			js, _ := jetstream.New(h.nc)
			m, err := js.Stream(ctx, "AGENT_DLQ")
			if err != nil {
				t.Fatal(err)
			}
			raw, err := m.GetLastMsgForSubject(ctx, "agent.dlq.default")
			if err != nil {
				t.Fatal(err)
			}
			if raw.Header.Get("Jetagent-Job-Id") != job.ID || raw.Header.Get("Jetagent-Reason") != st.Error {
				t.Errorf("dead letter %v", raw.Header)
			}
		})
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
}

// TestTooManyClientTools: the job schema caps client_tools at 64, so submit
// refuses such a job before publishing, and a worker dead-letters the same
// payload published by any other NATS client, with the same words.
func TestTooManyClientTools(t *testing.T) {
	h := startClientWorker(t, askModel, nil)
	ctx := natstest.Context(t)
	job := clientJob(t, "door-too-many", "ask_user")
	job.ClientTools = make([]clienttools.Decl, 65)
	for i := range job.ClientTools {
		job.ClientTools[i] = clienttools.Decl{Name: fmt.Sprint("tool_", i), InputSchema: askSchema}
	}
	const want = "at '/client_tools': maxItems: got 65, want 64"
	if _, err := h.client.Submit(ctx, job); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Submit = %v, want a refusal naming %q", err, want)
	}
	payload, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "agent.jobs.default", payload, jetstream.WithMsgID(job.ID)); err != nil {
		t.Fatal(err)
	}
	st, err := h.client.Wait(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != jobs.StatusDead || !strings.Contains(st.Error, want) {
		t.Fatalf("state %s error %q, want dead naming %q", st.Status, st.Error, want)
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
}
