package clienttools

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestArgumentsNotUTF8: arguments holding bytes that are not UTF-8 were
// signed as they were, but JSON carries text: the request's encoding
// replaced the bytes, the submitter's MAC check failed ("bad mac") and the
// call waited out its whole timeout as unanswered. They are replaced
// (U+FFFD) before signing, as Serve does for its output.
func TestArgumentsNotUTF8(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	rejected := make(chan error, 1)
	serve(t, submitter, "job-utf8", testSecret, echo, Options{OnReject: func(err error) {
		select {
		case rejected <- err:
		default:
		}
	}})
	c := newCaller(t, worker, "job-utf8", testSecret, Options{Timeout: 10 * time.Second})
	res, err := c.Call(natstest.Context(t), "say", json.RawMessage("{\"text\":\"caf\xe9 \xff\"}"))
	if want := "say {\"text\":\"caf\uFFFD \uFFFD\"}"; err != nil || res.Text != want {
		select {
		case rej := <-rejected:
			t.Logf("the submitter rejected the request: %v", rej)
		default:
		}
		t.Errorf("got %q, %v; want %q", res.Text, err, want)
	}
}
