package jobs

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/natstest"
)

func TestRedactUnparsableURLs(t *testing.T) {
	t.Parallel()
	got := redactURLs("nats://u:pw@a:x,t0ken@b:4222,nats://c:4222/p@th")
	if want := "nats://u:xxxxx@a:x,xxxxx@b:4222,nats://c:4222/p@th"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// NATS_URL's password or token is in no error of Connect (submit's, which
// it prints) or ConnectWait (the worker's), nor in the retries it logs:
// neither for a server that is not there nor for a URL nats.go cannot
// parse, whose url.Parse error quotes it whole.
func TestConnectErrorsHideTheURLsCredentials(t *testing.T) {
	t.Parallel()
	port := natstest.FreePort(t) // nothing listens there
	for _, userinfo := range []string{"u:pw-s3cret", "t0ken-s3cret"} {
		for _, url := range []string{
			fmt.Sprintf("nats://%s@127.0.0.1:%d", userinfo, port),
			fmt.Sprintf("nats://127.0.0.1:%d, nats://%s@127.0.0.1:x", port, userinfo),
		} {
			t.Run(url, func(t *testing.T) {
				t.Parallel()
				var logs bytes.Buffer
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // one attempt, then the error
				_, waitErr := NATSConfig{URL: url}.ConnectWait(ctx, "jetagent-test", slog.New(slog.NewTextHandler(&logs, nil)))
				_, err := NATSConfig{URL: url}.Connect("jetagent-test")
				for what, text := range map[string]string{"Connect": fmt.Sprint(err), "ConnectWait": fmt.Sprint(waitErr), "log": logs.String()} {
					if strings.Contains(text, "s3cret") {
						t.Errorf("%s: %s", what, text)
					}
				}
				if err == nil || !strings.Contains(err.Error(), fmt.Sprint(port)) {
					t.Errorf("Connect: %v, want an error naming the server", err)
				}
			})
		}
	}
}
