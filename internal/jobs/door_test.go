package jobs_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jetagent/jetagent/internal/jobs"
)

// TestDoorWords: an empty body is called empty, and a job naming another
// queue than its subject's is refused with both named.
func TestDoorWords(t *testing.T) {
	t.Parallel()
	v, err := jobs.NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		body, want string
	}{
		{"", "job is not JSON: the body is empty"},
		{"\t \n", "job is not JSON: the body is empty (3 bytes of white space)"},
	} {
		_, err := v.DecodeJob([]byte(tt.body))
		if !errors.Is(err, jobs.ErrNotJSON) || err.Error() != tt.want {
			t.Errorf("%q: %v, want %q", tt.body, err, tt.want)
		}
	}
	names, _ := jobs.NewNames("")
	for _, tt := range []struct {
		queue, published string
		ok               bool
	}{{"", "default", true}, {"default", "default", true}, {"gpu", "gpu", true}, {"other", "default", false}} {
		err := jobs.CheckQueue(&jobs.Job{Task: "t", Queue: tt.queue}, tt.published, names)
		if (err == nil) != tt.ok || (err != nil && (!errors.Is(err, jobs.ErrWrongQueue) || !errors.Is(err, jobs.ErrRejected))) {
			t.Errorf("queue %q on %q: %v", tt.queue, tt.published, err)
		}
	}
}

// TestDoorNamesTypos: a member the job schema does not allow, and a string
// that is no value of an enum, are named with the allowed one they are
// probably a typo of, at any depth, and the reason is the same on every
// run (the schema library lists the members in map order).
func TestDoorNamesTypos(t *testing.T) {
	t.Parallel()
	v, err := jobs.NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "job fails schemas/job.schema.json: at '': "
	for _, tt := range []struct {
		body, want string
	}{
		{`{"task":"t","tool_mod":"search"}`, prefix + "additional properties 'tool_mod' not allowed (did you mean 'tool_mode'?)"},
		{`{"task":"t","maxrounds":3}`, prefix + "additional properties 'maxrounds' not allowed (did you mean 'max_rounds'?)"},
		{`{"task":"t","Servers":["a"]}`, prefix + "additional properties 'Servers' not allowed (did you mean 'servers'?)"},
		{`{"task":"t","colour":"red"}`, prefix + "additional properties 'colour' not allowed"},
		{`{"task":"t","tool_mode":"serch"}`, "job fails schemas/job.schema.json: at '/tool_mode': value must be one of 'auto', 'full', 'deferred', 'search', 'code' (did you mean 'search'?)"},
		{`{"task":"t","tool_mode":"Code"}`, "job fails schemas/job.schema.json: at '/tool_mode': value must be one of 'auto', 'full', 'deferred', 'search', 'code' (did you mean 'code'?)"},
		{`{"task":"t","tool_mode":"lean"}`, "job fails schemas/job.schema.json: at '/tool_mode': value must be one of 'auto', 'full', 'deferred', 'search', 'code'"},
		{`{"task":"t","zzz":1,"timout":"1m","aaa":2,"modle":"m"}`,
			prefix + "additional properties 'aaa', 'modle', 'timout', 'zzz' not allowed (did you mean 'model' for 'modle', 'timeout' for 'timout'?)"},
		{`{"task":"t","client_secret":"0123456789abcdef0123456789abcdef","client_tools":[{"name":"a","descripton":"d","input_schema":{}}]}`,
			"job fails schemas/job.schema.json: at '/client_tools/0': additional properties 'descripton' not allowed (did you mean 'description'?)"},
	} {
		for range 5 {
			_, err := v.DecodeJob([]byte(tt.body))
			if !errors.Is(err, jobs.ErrSchema) || err.Error() != tt.want {
				t.Fatalf("%s:\n got %v\nwant %s", tt.body, err, tt.want)
			}
		}
	}
}

// TestCheckServersNamesThem: a job naming a server the worker does not
// configure is refused with the configured ones, and the one a typo meant.
func TestCheckServersNamesThem(t *testing.T) {
	t.Parallel()
	names := []string{"filesystem", "github", "memory"}
	known := func(s string) bool { return slices.Contains(names, s) }
	for _, tt := range []struct {
		servers []string
		known   func(string) bool
		names   []string
		want    string
	}{
		{[]string{"github", "memory"}, known, names, ""},
		{[]string{"github", "filesytem"}, known, names, `job names an MCP server this worker does not configure: "filesytem" (did you mean "filesystem"? configured: filesystem, github, memory)`},
		{[]string{"shell"}, known, names, `job names an MCP server this worker does not configure: "shell" (configured: filesystem, github, memory)`},
		{[]string{"shell"}, known, nil, `job names an MCP server this worker does not configure: "shell"`},
		{[]string{"shell"}, nil, nil, `job names an MCP server this worker does not configure: "shell" (this worker has no MCP servers)`},
	} {
		err := jobs.CheckServers(&jobs.Job{Task: "t", Servers: tt.servers}, tt.known, tt.names...)
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && (got != tt.want || !errors.Is(err, jobs.ErrUnknownServer))) {
			t.Errorf("%q: %v, want %q", tt.servers, err, tt.want)
		}
	}
}
