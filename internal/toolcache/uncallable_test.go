package toolcache

import (
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUncallableToolsLeftOut: a tool whose input schema's type is not
// "object" (OpenAI refuses a whole request that offers one, so it failed
// every job seeing it; no call can pass its validation either) or that
// runs only as an MCP task (every call answered "requires task
// augmentation", as server-everything's simulate-research-query did) or
// whose schema nests so deep that compiling it for validation costs
// minutes (seen end to end with bin/worker: 2,000 levels, 42 s before the
// first call's validation answered) or holds so many subschemas that
// compiling it costs as much (time about quadratic in their number: 60,000
// properties, a 5 MB schema, 29 s) is left out with the reason, and the server's other tools are served; an
// error result that says nothing is named, not given as empty text (the
// model read "Error: ").
func TestUncallableToolsLeftOut(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval = 30*time.Second, 0
	logs := make(logRecords, 1000)
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": hostileServer("uncallable", nil)}},
		WithSettings(s), WithLogger(slog.New(logs)))
	if st := statusOf(p, "srv"); st.State != StateReady {
		t.Fatalf("status = %+v, want ready", st)
	}
	left := attr(logs.next(t, "MCP tool definitions left out", 10*time.Second), "err").String()
	tools := []struct {
		name   string
		listed bool
		reason string // in the log when left out
	}{
		{"echo", true, ""},
		{"task_optional", true, ""},
		{"no_type", true, ""},
		{"bad_string_type", false, `"type" is "string", not "object"`},
		{"bad_type_list", false, `"type" is ["object","null"], not "object"`},
		{"bad_array_type", false, `"type" is "array", not "object"`},
		{"bad_task_only", false, `execution.taskSupport is "required"`},
		{"bad_deep", false, "nests more than 100 levels deep"},
		{"deep_enough", true, ""},
		{"bad_wide", false, "holds more than 10000 subschemas"},
		{"wide_enough", true, ""},
	}
	for _, tc := range tools {
		if got := p.Registry().Has(tc.name); got != tc.listed {
			t.Errorf("%s listed = %v, want %v", tc.name, got, tc.listed)
		}
		if !tc.listed && !strings.Contains(left, strconv.Quote(tc.name)+": ") {
			t.Errorf("left out: %s; %q not named", left, tc.name)
		}
		if tc.reason != "" && !strings.Contains(left, tc.reason) {
			t.Errorf("left out: %s; want the reason %s", left, tc.reason)
		}
	}
	if tl, ok := p.Registry().Get("no_type"); !ok || !strings.HasPrefix(string(tl.Parameters), `{"type":"object"`) {
		t.Errorf("no_type parameters = %s", tl.Parameters)
	}

	v := newTestView(t, p, nil, nil, nil)
	results := []struct{ text, want string }{
		{"emptyerror", "the tool reported an error and said nothing more"},
		{"blankerror", "the tool reported an error and said nothing more"},
	}
	for _, tc := range results {
		res, err := callErr(v, "echo", tc.text)
		if err != nil || !res.IsError || res.Text != tc.want {
			t.Errorf("echo(%s) = %+v, %v; want the error text %q", tc.text, res, err, tc.want)
		}
	}
}

// TestLeftOutSaidOnce: the definitions a server's list leaves out are
// logged when they first are, not again at every re-read of the same list
// (each list_changed, up to twice a second, and each resync logged the
// same warning: seen end to end with bin/worker, server-everything's
// simulate-research-query named twice within a second of starting).
func TestLeftOutSaidOnce(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval = 30*time.Second, 0
	logs := make(logRecords, 1000)
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": hostileServer("uncallable", nil)}},
		WithSettings(s), WithLogger(slog.New(logs)))
	v := newTestView(t, p, nil, nil, nil)
	logs.next(t, "MCP tool definitions left out", 10*time.Second)
	lists := func() int {
		res, err := callErr(v, "echo", "lists")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(res.Text)
		return n
	}
	// Two re-reads: the run loop does one at a time, so when the server
	// sees the third tools/list, the first re-read (the second list) has
	// been logged, if it was.
	for want := 2; want <= 3; want++ {
		if _, err := callErr(v, "echo", "listchanged"); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for lists() < want {
			if time.Now().After(deadline) {
				t.Fatalf("no re-read %d after list_changed", want)
			}
			runtime.Gosched()
		}
	}
	for {
		select {
		case r := <-logs:
			if r.Message == "MCP tool definitions left out" {
				t.Fatalf("logged again at a re-read of the same list: %v", attr(r, "err"))
			}
			continue
		default:
		}
		break
	}
}
