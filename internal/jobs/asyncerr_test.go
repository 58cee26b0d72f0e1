package jobs

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestAsyncErrorHandler: one message is reported once per
// AsyncErrorEvery, the next report saying how often it came meanwhile;
// another message is reported at once; the subject is the subscription's.
func TestAsyncErrorHandler(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	var got []string
	h := asyncErrorHandler(func(err error, subject string, repeated int) {
		got = append(got, fmt.Sprintf("%v|%s|%d", err, subject, repeated))
	}, func() time.Time { return now })
	refused := errors.New("nats: permissions violation")
	sub := &nats.Subscription{Subject: "agent.x"}
	h(nil, sub, refused)
	h(nil, sub, refused)
	h(nil, nil, refused)
	h(nil, nil, errors.New("nats: consumer not active"))
	h(nil, nil, nil)
	now = now.Add(AsyncErrorEvery)
	h(nil, nil, refused)
	want := []string{
		"nats: permissions violation|agent.x|0",
		"nats: consumer not active||0",
		"nats: permissions violation||2",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reported %q, want %q", got, want)
	}
	// Many distinct messages (they name subjects) do not grow it without bound.
	for i := range 1000 {
		h(nil, nil, fmt.Errorf("nats: refused on subject %d", i))
	}
	if len(got) != 3+1000 {
		t.Errorf("%d reports of 1000 distinct messages", len(got)-3)
	}
}
