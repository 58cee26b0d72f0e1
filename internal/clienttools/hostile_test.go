package clienttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestOddOutputsReachTheWorker: what a handler returns arrives, whatever its
// bytes. Output that is not UTF-8 (a binary file, an error naming a file
// with such a name) used to be signed before JSON replaced its bytes, so
// the worker rejected the answer and waited out its timeout.
func TestOddOutputsReachTheWorker(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	tests := []struct {
		name      string
		out       string
		err       error
		want      string
		wantIsErr bool
	}{
		{"empty", "", nil, "", false},
		{"not UTF-8", "bin\xff\xfe.", nil, "bin\uFFFD.", false},
		{"not UTF-8 error", "", errors.New("open \xc3(: denied"), "open \uFFFD(: denied", true},
		{"NUL and controls", "a\x00b\x1b[0m", nil, "a\x00b\x1b[0m", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := fmt.Sprintf("job-odd-%d", i)
			serve(t, submitter, job, testSecret, func(context.Context, string, json.RawMessage) (string, bool, error) {
				return tt.out, false, tt.err
			}, Options{})
			c := newCaller(t, worker, job, testSecret, Options{Timeout: 10 * time.Second})
			res, err := c.Call(natstest.Context(t), "cat", nil)
			if err != nil || res.Text != tt.want || res.IsError != tt.wantIsErr {
				t.Fatalf("got %q (isError %v), %v; want %q (isError %v)", res.Text, res.IsError, err, tt.want, tt.wantIsErr)
			}
		})
	}
}

// TestBadAnswersNamedAtTimeout: a submitter (or anyone on the reply
// subject) that answers with something that is not an authentic answer is
// ignored, and the timeout error says so rather than that nobody answered.
func TestBadAnswersNamedAtTimeout(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	signed := func(secret, id, out string) []byte {
		a := Answer{V: WireVersion, ID: id, Output: out}
		a.Sign(secret)
		b, _ := json.Marshal(a)
		return b
	}
	tests := []struct {
		name   string
		answer func(req Request) []byte
		want   string // in the error
	}{
		{"not JSON", func(Request) []byte { return []byte("42 is the answer") }, "1 message(s) to the reply subject ignored, the last: client tool: message rejected: undecodable answer"},
		{"empty body", func(Request) []byte { return nil }, "undecodable answer: unexpected end of JSON input"},
		{"error shape", func(Request) []byte { return []byte(`{"error":{"code":-32000,"message":"boom"}}`) }, "message rejected: version 0"},
		{"another secret", func(r Request) []byte { return signed(strings.Repeat("s", 32), r.ID, "x") }, "message rejected: bad mac"},
		{"another call", func(Request) []byte { return signed(testSecret, "0123456789abcdef0123456789abcdef", "x") }, "answer to another request"},
		// Raw bytes that are not UTF-8, MACed as sent: JSON decoding
		// replaces them, so the MAC cannot match.
		{"raw not UTF-8", func(r Request) []byte {
			a := Answer{V: WireVersion, ID: r.ID, Output: "a\xffb"}
			a.Sign(testSecret)
			return fmt.Appendf(nil, `{"v":1,"id":%q,"output":"a%sb","mac":%q}`, r.ID, "\xff", a.MAC)
		}, "message rejected: bad mac"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := fmt.Sprintf("job-bad-%d", i)
			sub, err := submitter.Subscribe(Subject("agent", job), func(m *nats.Msg) {
				var req Request
				_ = json.Unmarshal(m.Data, &req)
				_ = m.Respond(tt.answer(req))
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			if err := submitter.Flush(); err != nil {
				t.Fatal(err)
			}
			rejected := make(chan error, 1)
			// The timeout must come after the bad answer, however busy the
			// machine: seconds, not milliseconds (the cases run in parallel).
			c := newCaller(t, worker, job, testSecret, Options{Timeout: 5 * time.Second, OnReject: func(err error) {
				select {
				case rejected <- err:
				default:
				}
			}})
			_, err = c.Call(natstest.Context(t), "ask", nil)
			if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "the submitter did not answer; ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want ErrNoAnswer naming %q", err, tt.want)
			}
			if err := recv(t, rejected); err == nil {
				t.Error("OnReject was told of no error")
			}
		})
	}
}

// TestFloodOfForgedAnswers: whoever can publish to the worker's inbox can
// send answers faster than Call reads them; the messages beyond the
// inbox's pending limit are dropped and nats.go reports a slow consumer.
// That ended the wait at once ("nats: slow consumer, messages dropped",
// seen end to end with bin/worker), though a forged answer must end
// nothing; now the wait goes on and the genuine answer is taken.
func TestFloodOfForgedAnswers(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	slow := make(chan struct{})
	var slowOnce sync.Once
	worker := natstest.Connect(t, s, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrSlowConsumer) {
			slowOnce.Do(func() { close(slow) })
		}
	}))
	submitter, rogue := natstest.Connect(t, s), natstest.Connect(t, s)

	var req Request
	var reply string
	captured := make(chan struct{})
	sub, err := rogue.Subscribe(Subject("agent", "job-flood"), func(m *nats.Msg) {
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Error(err)
		}
		reply = m.Reply
		close(captured)
		forged, _ := json.Marshal(Answer{V: WireVersion, ID: req.ID, Output: "forged", MAC: strings.Repeat("0", 64)})
		for range 4096 { // far beyond the inbox's pending limit of 256
			_ = rogue.Publish(m.Reply, forged)
		}
		_ = rogue.Flush()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := rogue.Flush(); err != nil {
		t.Fatal(err)
	}

	first := true
	c := newCaller(t, worker, "job-flood", testSecret, Options{
		Timeout: time.Minute,
		OnReject: func(error) {
			<-captured // the rogue read the request before it sent anything
			if first {
				// Held, so the flood overflows the inbox while Call does
				// not read.
				first = false
				select {
				case <-slow:
				case <-time.After(20 * time.Second):
					t.Error("no slow consumer")
				}
			}
			// Each message read makes room: the genuine answer is sent
			// again until one is queued and read.
			a := Answer{V: WireVersion, ID: req.ID, Output: "genuine"}
			a.Sign(testSecret)
			b, _ := json.Marshal(a)
			_ = submitter.Publish(reply, b)
		},
	})
	res, err := c.Call(natstest.Context(t), "echo", nil)
	if err != nil || res.Text != "genuine" {
		t.Fatalf("got %q, %v; want genuine", res.Text, err)
	}
}

// TestAnswerVersionAsTheSchemaReadsIt: "v" is accepted exactly when
// client_response.schema.json's "const": 1 holds. An answer written by an
// encoder that writes integral numbers as 1.0 was refused as
// undecodable ("cannot unmarshal number 1.0 into Go struct field Answer.v
// of type int") and its call waited out the whole timeout.
func TestAnswerVersionAsTheSchemaReadsIt(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	schema := compileFile(t, "client_response.schema.json")
	tests := []struct {
		v      string // the JSON text of "v"
		ok     bool
		reason string // in the timeout error when not ok
	}{
		{`1`, true, ""},
		{`1.0`, true, ""},
		{`1e0`, true, ""},
		{`10e-1`, true, ""},
		{`"1"`, false, `v is "1", not an integer`},
		{`1.5`, false, "v is 1.5, not an integer"},
		{`2`, false, "version 2"},
		{`true`, false, "v is true, not an integer"},
	}
	for i, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			t.Parallel()
			job := fmt.Sprintf("job-version-%d", i)
			answer := func(r Request) []byte {
				a := Answer{V: WireVersion, ID: r.ID, Output: "done"}
				a.Sign(testSecret)
				return fmt.Appendf(nil, `{"v":%s,"id":%q,"output":"done","mac":%q}`, tt.v, r.ID, a.MAC)
			}
			// The schema's verdict on the same message, for the worker to agree with.
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(answer(Request{ID: "0123456789abcdef0123456789abcdef"})))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(doc); (err == nil) != tt.ok {
				t.Fatalf("the schema says valid=%v, the case %v: %v", err == nil, tt.ok, err)
			}
			sub, err := submitter.Subscribe(Subject("agent", job), func(m *nats.Msg) {
				var req Request
				_ = json.Unmarshal(m.Data, &req)
				_ = m.Respond(answer(req))
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Unsubscribe() })
			if err := submitter.Flush(); err != nil {
				t.Fatal(err)
			}
			c := newCaller(t, worker, job, testSecret, Options{Timeout: 5 * time.Second})
			res, err := c.Call(natstest.Context(t), "ask", nil)
			switch {
			case tt.ok && (err != nil || res.Text != "done"):
				t.Fatalf("got %q, %v; want the answer", res.Text, err)
			case !tt.ok && (!errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), tt.reason)):
				t.Fatalf("got %q, %v; want ErrNoAnswer naming %q", res.Text, err, tt.reason)
			}
		})
	}
}
