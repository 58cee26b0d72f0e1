package jobs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestPrefixesSharingNamesAreRefused: streams, buckets and consumers are
// named by the prefix in upper case (with - as _), so deployments with
// prefixes agent and Agent share AGENT_JOBS and the rest. The second
// deployment's worker used to rewrite the streams' subjects and the
// consumer filters to its own, logging only a warning: the first
// deployment's submissions then failed ("no response from stream") and
// its jobs went to the other's workers. Now the second is refused with a
// conflict naming both prefixes, before anything is created or changed,
// and the first goes on.
func TestPrefixesSharingNamesAreRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		first, second string
		// prepare changes the first deployment's assets before the second comes
		prepare func(ctx context.Context, t *testing.T, js jetstream.JetStream, first Names)
		// created: assets the refused second deployment must not have made
		created []string
	}{
		{name: "case", first: "agent", second: "Agent"},
		{name: "upper case", first: "Agent", second: "AGENT"},
		{name: "dash and underscore", first: "team-a", second: "team_a"},
		{
			// Only the events stream is left: the jobs stream must not be
			// created before the events stream is refused.
			name: "no jobs stream", first: "agent", second: "Agent",
			prepare: func(ctx context.Context, t *testing.T, js jetstream.JetStream, first Names) {
				if err := js.DeleteStream(ctx, first.JobsStream()); err != nil {
					t.Fatal(err)
				}
			},
			created: []string{"AGENT_JOBS"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			ctx := natstest.Context(t)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			first, second := Names{Prefix: tt.first}, Names{Prefix: tt.second}
			cfg := TopologyConfig{Names: first, Queues: []string{"default"}}
			if _, err := EnsureTopology(ctx, js, cfg, t.Logf); err != nil {
				t.Fatal(err)
			}
			if tt.prepare != nil {
				tt.prepare(ctx, t, js, first)
			}
			before := streamSubjects(ctx, t, js)
			var logs []string
			_, err = EnsureTopology(ctx, js, TopologyConfig{Names: second, Queues: []string{"default"}},
				func(f string, a ...any) { logs = append(logs, f) })
			if !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), `prefix "`+tt.first+`"`) ||
				!strings.Contains(err.Error(), `prefix "`+tt.second+`"`) {
				t.Fatalf("second deployment: %v; want a conflict naming %q and %q", err, tt.first, tt.second)
			}
			if len(logs) > 0 {
				t.Errorf("the refused deployment changed something: %q", logs)
			}
			after := streamSubjects(ctx, t, js)
			for name, subjects := range after {
				if want, ok := before[name]; !ok && slices.Contains(tt.created, name) {
					t.Errorf("stream %s was created (%v)", name, subjects)
				} else if ok && !slices.Equal(subjects, want) {
					t.Errorf("stream %s has subjects %v, had %v", name, subjects, want)
				}
			}
			if tt.prepare != nil {
				return
			}
			jobsStream, err := js.Stream(ctx, first.JobsStream())
			if err != nil {
				t.Fatal(err)
			}
			cons, err := jobsStream.Consumer(ctx, first.Consumer("default"))
			if err != nil {
				t.Fatal(err)
			}
			if f := cons.CachedInfo().Config.FilterSubject; f != first.JobsSubject("default") {
				t.Errorf("consumer filter %q, want %q", f, first.JobsSubject("default"))
			}
			// The first deployment's client still submits; the second's
			// client is refused with the same conflict.
			c, err := NewClient(ctx, nc, ClientConfig{Prefix: tt.first})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Submit(ctx, &Job{Task: "echo:hi"}); err != nil {
				t.Errorf("first deployment's submit: %v", err)
			}
			if _, err := NewClient(ctx, nc, ClientConfig{Prefix: tt.second}); !errors.Is(err, ErrTopology) ||
				!strings.Contains(err.Error(), `prefix "`+tt.first+`"`) {
				t.Errorf("second deployment's client: %v; want a conflict naming %q", err, tt.first)
			}
		})
	}
}

// TestPrefixConflictOnAConsumer: a consumer whose filter is another
// prefix's (left by an older worker that rewrote the jobs stream) is
// refused, not rewritten; a settings change of a deployment's own assets
// is still applied (TestEnsureTopology).
func TestPrefixConflictOnAConsumer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	agent, other := Names{Prefix: "agent"}, Names{Prefix: "Agent"}
	if _, err := EnsureTopology(ctx, js, TopologyConfig{Names: agent, Queues: []string{"bulk"}}, t.Logf); err != nil {
		t.Fatal(err)
	}
	// What an older worker of "Agent" did: the stream's subjects rewritten.
	st, err := js.Stream(ctx, agent.JobsStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Subjects = []string{other.JobsSubject("*")}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{agent.EventsStream(), agent.DLQStream()} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := st.CachedInfo().Config
		cfg.Subjects = []string{strings.Replace(cfg.Subjects[0], "agent.", "Agent.", 1)}
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	_, err = EnsureTopology(ctx, js, TopologyConfig{Names: other, Queues: []string{"bulk"}}, t.Logf)
	if !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "consumer AGENT_JOBS/workers-bulk") ||
		!strings.Contains(err.Error(), `prefix "agent"`) || !strings.Contains(err.Error(), `prefix "Agent"`) {
		t.Fatalf("got %v; want the consumer's conflict naming both prefixes", err)
	}
	c, err := st.Consumer(ctx, agent.Consumer("bulk"))
	if err != nil {
		t.Fatal(err)
	}
	if f := c.CachedInfo().Config.FilterSubject; f != agent.JobsSubject("bulk") {
		t.Errorf("consumer filter rewritten to %q", f)
	}
}

// streamSubjects maps every stream to its subjects.
func streamSubjects(ctx context.Context, t *testing.T, js jetstream.JetStream) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		out[info.Config.Name] = info.Config.Subjects
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
