package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/cfgerr"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/textdist"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// jobFlags are the flags of a submission.
type jobFlags struct {
	id, queue, model, system, mode   string
	servers, allow, deny, timeout    string
	jobFile, localMCP, file, outFile string
	maxRounds, parallel              int
	meta                             []string
	detach, json                     bool
	set                              map[string]bool // flags given on the command line
}

// submitCommand is submitting a task, or a batch with --file. In the
// usage texts, the back-quoted word names the flag's value in the help.
func (c *cli) submitCommand() *command {
	f := &jobFlags{}
	fs := newFlagSet("submit")
	fs.StringVar(&f.id, "id", "", "job `ID` (default: a new ULID); resubmitting an id within the duplicate window does not queue it twice")
	fs.StringVar(&f.queue, "queue", jobs.DefaultQueue, "queue `NAME`")
	fs.StringVar(&f.model, "model", "", "model `NAME`, instead of the worker's")
	fs.StringVar(&f.system, "system", "", "system prompt `TEXT`, instead of the worker's")
	fs.StringVar(&f.mode, "mode", "", "tool `MODE`: auto, full, deferred, search, code")
	fs.StringVar(&f.servers, "servers", "", "the MCP servers `a,b` of the operator's configuration (default: all; \"\": none)")
	fs.StringVar(&f.allow, "allow", "", "tool name `GLOBS` to allow (comma-separated)")
	fs.StringVar(&f.deny, "deny", "", "tool name `GLOBS` to deny (comma-separated)")
	fs.IntVar(&f.maxRounds, "max-rounds", 0, "at most `N` LLM rounds")
	fs.StringVar(&f.timeout, "timeout", "", "job timeout `DUR`, e.g. 90s, 5m")
	fs.StringArrayVar(&f.meta, "meta", nil, "metadata `k=v` (repeatable)")
	fs.StringVar(&f.jobFile, "job", "", "a whole job as JSON in `FILE` (\"-\" reads stdin; the flags above override its fields)")
	fs.StringVar(&f.localMCP, "local-mcp", "", "offer the tools of the local MCP servers in `FILE` (the worker's format) as client tools, answered here")
	fs.BoolVar(&f.detach, "detach", false, "print the job id and return without following (batch: submit every line and write receipts, without waiting)")
	fs.StringVar(&f.file, "file", "", "batch mode: the jobs of `FILE`, one a line (\"-\" reads stdin)")
	fs.IntVar(&f.parallel, "parallel", 8, "batch: `N` jobs in flight at once")
	fs.StringVar(&f.outFile, "out", "", "batch: write one result (JSON, with its \"line\") per job to `FILE`")
	fs.BoolVar(&f.json, "json", false, "machine-readable output (JSON lines) everywhere")
	return &command{flags: fs, use: `[flags] "task" | --file FILE`, short: "submit a task or a batch",
		run: func(pos []string) (int, error) {
			f.set = map[string]bool{}
			fs.Visit(func(fl *pflag.Flag) { f.set[fl.Name] = true })
			if fs.ArgsLenAtDash() != 0 { // words after "--" are a task, whatever they look like
				if err := notACommand(pos); err != nil {
					return 0, err
				}
			}
			return c.submit(f, pos)
		}}
}

// commandLike maps words a user may type for a command that does not
// exist (or a command misspelt by a letter) to the command meant.
var commandLike = map[string]string{
	"wait": "watch --wait", "events": "watch", "follow": "watch", "tail": "watch", "logs": "watch",
	"get": "status", "show": "status", "info": "status", "state": "status", "result": "status",
	"stop": "cancel", "kill": "cancel", "abort": "cancel",
}

// notACommand refuses "submit wait ID", "submit stauts ID", "submit
// --json status ID" and the like:
// an unknown first word is the start of a task, so without this such a
// line is queued as the task "wait ID" and sent to a model (a paid call,
// and no word that the command was wrong). Only a command-like word
// followed by a single word that could be a job id is refused; any task
// can still be given quoted or after "--".
func notACommand(pos []string) error {
	if len(pos) != 2 || !jobs.ValidID(pos[1]) {
		return nil
	}
	word := strings.ToLower(pos[0])
	if slices.Contains([]string{"status", "watch", "transcript", "cancel"}, pos[0]) {
		// A command's own name here came after a flag (run dispatches it
		// when first): "submit --json status ID" queued the task
		// "status ID" and sent it to a model.
		return usagef("%q after a flag is the start of a task, not the %s command: a command comes first and its flags "+
			"after it (submit %s [flags] %s); to submit the task %q, quote it or give it after --",
			pos[0], pos[0], pos[0], pos[1], strings.Join(pos, " "))
	}
	meant, ok := commandLike[word]
	if !ok {
		for _, name := range []string{"status", "watch", "transcript", "cancel"} {
			if d := textdist.Distance(word, name); d > 0 && d <= max(1, len(name)/5) {
				meant, ok = name, true
				break
			}
		}
	}
	if !ok {
		return nil
	}
	return usagef("%q is not a command: did you mean submit %s %s? (to submit the task %q, quote it or give it after --)",
		pos[0], meant, pos[1], strings.Join(pos, " "))
}

// apply sets the job fields given as flags. In batch mode flags are
// defaults: a field the line sets wins (override false).
func (f *jobFlags) apply(j *jobs.Job, override bool) error {
	set := func(name string, empty bool) bool { return f.set[name] && (override || empty) }
	if set("id", j.ID == "") {
		j.ID = f.id
	}
	if set("queue", j.Queue == "") {
		j.Queue = f.queue
	}
	if set("model", j.Model == "") {
		j.Model = f.model
	}
	if set("system", j.System == "") {
		j.System = f.system
	}
	if set("mode", j.ToolMode == "") {
		j.ToolMode = foldMode(f.mode)
	}
	if set("servers", j.Servers == nil) {
		j.Servers = splitList(f.servers)
		if j.Servers == nil {
			j.Servers = []string{} // --servers "" means none
		}
	}
	if set("allow", j.Allow == nil) {
		j.Allow = splitList(f.allow)
	}
	if set("deny", j.Deny == nil) {
		j.Deny = splitList(f.deny)
	}
	if set("timeout", j.Timeout == "") {
		j.Timeout = f.timeout
	}
	if set("max-rounds", j.MaxRounds == 0) {
		j.MaxRounds = f.maxRounds
	}
	given := map[string]string{} // --meta k=a --meta k=b kept b without a word
	for _, kv := range f.meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--meta %q: want key=value", kv)
		}
		if prev, dup := given[k]; dup && prev != v {
			return usagef("--meta %q: key %q is given twice (%q and %q): give it once", kv, k, prev, v)
		}
		given[k] = v
		if j.Metadata == nil {
			j.Metadata = map[string]string{}
		}
		if _, exists := j.Metadata[k]; override || !exists {
			j.Metadata[k] = v
		}
	}
	return nil
}

// check refuses flag values that would otherwise be dropped or reach a
// worker that cannot use them, before anything is read or connected.
func (f *jobFlags) check() error {
	if f.file == "" {
		for _, name := range []string{"out", "parallel"} {
			if f.set[name] {
				return usagef("--%s applies to a batch: give --file FILE (or drop --%s)", name, name)
			}
		}
	}
	if f.set["max-rounds"] && f.maxRounds < 1 {
		// 0 would be left out of the job (the worker's default applies).
		return usagef("--max-rounds must be at least 1 (got %d); leave it out for the worker's default", f.maxRounds)
	}
	if f.set["timeout"] {
		// The worker would run the job with its default timeout instead
		// (a note in the started event), as for --max-rounds 0.
		d, err := time.ParseDuration(f.timeout)
		switch {
		case err == nil && d <= 0:
			return usagef("--timeout must be positive (got %s); leave it out for the worker's default", f.timeout)
		case err != nil && timeoutSyntax.MatchString(f.timeout):
			return usagef("--timeout %s is longer than a duration can be (at most %s); leave it out for the worker's default",
				f.timeout, time.Duration(math.MaxInt64).Truncate(time.Hour))
		case !timeoutSyntax.MatchString(f.timeout) && f.timeout != "":
			// "--timeout 5" was refused by the job schema's pattern at
			// '/timeout', exit 1, not naming the flag or the unit it lacks.
			return usagef("--timeout %q is not a duration: give a number with a unit (ns, us, ms, s, m, h), such as 90s, 5m or 1h30m",
				f.timeout)
		}
	}
	for _, fl := range []struct{ name, value, instead string }{
		{"queue", f.queue, `go to the queue "default"`},
		{"model", f.model, "run with the worker's model"},
		{"system", f.system, "run with the worker's system prompt (a job cannot ask for none)"},
		{"mode", f.mode, "run in the worker's tool mode"},
		{"timeout", f.timeout, "run with the worker's timeout"},
	} {
		// Left out of the job, an empty value is the worker's default:
		// --queue "$QUEUE" with QUEUE unset sent the job to another pool.
		if f.set[fl.name] && fl.value == "" {
			return usagef("--%s is empty: the job would %s; give a value, or leave --%s out for that", fl.name, fl.instead, fl.name)
		}
	}
	if f.set["allow"] && splitList(f.allow) == nil {
		// An empty allow list is no filter: --allow "$TOOLS" with TOOLS
		// unset offered the job every tool.
		return usagef("--allow %q names no tool, which would allow every tool; leave --allow out for that, or give the globs to allow",
			f.allow)
	}
	for _, fl := range []struct{ name, globs string }{{"allow", f.allow}, {"deny", f.deny}} {
		for _, g := range splitList(fl.globs) {
			if _, err := path.Match(g, ""); err != nil {
				return usagef("--%s %q: bad glob %q: %v", fl.name, fl.globs, g, err)
			}
		}
	}
	for _, fl := range []struct{ name, value string }{
		{"id", f.id}, {"queue", f.queue}, {"model", f.model}, {"system", f.system}, {"mode", f.mode},
		{"servers", f.servers}, {"allow", f.allow}, {"deny", f.deny}, {"timeout", f.timeout},
	} {
		if err := notUTF8("--"+fl.name, fl.value); err != nil {
			return usageError{err}
		}
	}
	for _, kv := range f.meta {
		if err := notUTF8("--meta", kv); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// notUTF8 says where s (what names it) stops being UTF-8, or is nil. Go's
// JSON encoding turns each byte that is not UTF-8 into U+FFFD, so such
// text (a Latin-1 file, a binary piped in) reached the worker changed
// ("café" in Latin-1 ran as "caf\ufffd"), while the worker refuses a job
// published with such bytes.
func notUTF8(what, s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	if isUTF16([]byte(s)) { // a task piped from PowerShell: iconv -f LATIN1 was the wrong advice
		return fmt.Errorf("%s is UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8: convert it "+
			"(iconv -f UTF-16 -t UTF-8; PowerShell: Out-File -Encoding utf8)", what)
	}
	n := 0
	for n < len(s) {
		r, size := utf8.DecodeRuneInString(s[n:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		n += size
	}
	return fmt.Errorf("%s is not valid UTF-8 (at byte %d): the worker would get each such byte as U+FFFD; "+
		"convert the text to UTF-8 (iconv -f LATIN1 -t UTF-8, for a Latin-1 file)", what, n)
}

// timeoutSyntax is the job schema's pattern of a timeout.
var timeoutSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// checkJob refuses a job whose allow or deny glob path.Match (the
// worker's matcher) cannot read: the worker would take the job and fail
// it at its start with the same reason. So is one whose client tool
// declarations the worker's door (agentrun.Admit) refuses: a schema that
// does not compile, a type other than "object", a reserved name; the job
// passed job.schema.json and was dead-lettered.
func checkJob(j *jobs.Job) error {
	for _, l := range []struct {
		field string
		globs []string
	}{{"allow", j.Allow}, {"deny", j.Deny}} {
		for i, g := range l.globs {
			if _, err := path.Match(g, ""); err != nil {
				return fmt.Errorf("%s[%d]: bad glob %q: %w", l.field, i, g, err)
			}
		}
	}
	if len(j.ClientTools) > 0 {
		if err := clienttools.ValidateDecls(j.ClientTools, agentrun.DeclLimits()); err != nil {
			return err
		}
	}
	return nil
}

func (c *cli) submit(f *jobFlags, pos []string) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	var err error
	var jobData []byte
	switch f.jobFile {
	case "":
	case "-": // as --file - is: a job piped from jq or another program
		if f.file == "-" {
			return 0, usagef("--job - and --file - both read stdin: give one of them a file")
		}
		if isTerminal(c.stdin) { // nothing said submit was reading the terminal: it looked hung
			fmt.Fprintln(c.stderr, "submit: reading the job (JSON) from the terminal; end it with Ctrl-D")
		}
		if jobData, err = io.ReadAll(c.stdin); err != nil {
			return 0, fmt.Errorf("--job -: %w", err)
		}
	default:
		if jobData, err = os.ReadFile(f.jobFile); err != nil {
			return 0, err
		}
	}
	if f.file != "" {
		if len(pos) > 0 {
			return 0, usagef("--file and a task argument are exclusive")
		}
		switch {
		case f.set["id"]:
			return 0, usagef("--id does not apply to a batch: give each line its own \"id\"")
		case f.localMCP != "":
			return 0, usagef("--local-mcp does not apply to a batch: submit those jobs one at a time")
		}
		base := &jobs.Job{}
		if jobData != nil {
			if base, err = c.decodeJob(jobData, true); err != nil {
				return 0, fmt.Errorf("--job %s: %w", f.jobFile, err)
			}
		}
		return c.batch(f, base)
	}
	task := strings.TrimSpace(strings.Join(pos, " "))
	if task == "" && !hasTask(jobData) && !isTerminal(c.stdin) {
		b, err := io.ReadAll(c.stdin)
		if err != nil {
			return 0, err
		}
		task = strings.TrimSpace(string(b))
	}
	if err := notUTF8("the task", task); err != nil {
		return 0, err
	}
	base := &jobs.Job{}
	if jobData != nil {
		if base, err = c.decodeJob(jobData, task != ""); err != nil {
			return 0, fmt.Errorf("--job %s: %w%s", f.jobFile, err, severalValues(jobData, f.jobFile))
		}
	}
	if err := f.apply(base, true); err != nil {
		return 0, err
	}
	if task != "" {
		base.Task = task
	}
	if base.Task == "" {
		return 0, usagef("no task: give it as an argument, on stdin, or in --job")
	}
	if err := checkJob(base); err != nil { // the flags' were checked: these are --job's
		return 0, fmt.Errorf("--job %s: %w", f.jobFile, err)
	}
	if f.set["id"] && base.ID == "" {
		// --id "$ID" with $ID unset: a fresh ULID would queue the job again
		// on every retry of the script, which is what --id is there to stop.
		return 0, usagef("--id is empty: give a job id, or leave --id out for a new one")
	}
	if base.ID == "" {
		base.ID = ulid.Make().String()
	}
	if f.localMCP != "" && (len(base.ClientTools) > 0 || base.ClientSecret != "") {
		// --local-mcp makes the job's secret: the file's own client tools
		// would be sent to the local servers (answered "unknown tool"), and
		// whoever holds the file's secret could no longer answer them.
		return 0, usagef("--local-mcp declares the job's client tools and makes its client_secret: --job %s has client_tools "+
			"or a client_secret of its own; drop them from the file, or drop --local-mcp", f.jobFile)
	}
	cl, err := c.connect()
	if err != nil {
		return 0, err
	}
	var stopLocal func()
	if f.localMCP != "" {
		if f.detach {
			return 0, usagef("--local-mcp needs submit to stay and answer: drop --detach")
		}
		var err error
		if stopLocal, err = c.serveLocalMCP(base, f.localMCP); err != nil {
			return 0, err
		}
		defer stopLocal()
	}
	rc, err := cl.Submit(c.ctx, base)
	if err != nil {
		return 0, err
	}
	if rc.Duplicate && stopLocal != nil {
		// The job holds the secret of the submit that queued it, so this
		// one's answers would be refused and its requests rejected
		// unseen: the worker would wait out each call as unanswered.
		// Unsubscribed, the worker says nobody listens.
		stopLocal()
		_ = c.nc.Flush()
		if !rc.State.Status.Terminal() {
			fmt.Fprintf(c.stderr, "submit: warning: job %s was queued before, with the client secret of the submit that queued it: "+
				"this one cannot answer its client tools (--local-mcp not served); while none answers, each of its client "+
				"tool calls fails after the worker's JETAGENT_CLIENT_TOOL_TIMEOUT (submit watch --local-mcp %s %s answers "+
				"them with the job's secret; submit cancel %s stops it)\n", rc.ID, f.localMCP, rc.ID, rc.ID)
		}
	}
	// The same id again is how a submission is made idempotent, and then
	// following the earlier job is right. With another task it is a
	// collision: following would print the other job's answer as this
	// task's (exit 0), and --detach would report it queued.
	if rc.Duplicate && rc.State.OtherTask(base.Task) {
		return exitFailed, fmt.Errorf("job id %s is taken by another job (%s, task %q): this task was not queued; give it its own --id",
			rc.ID, rc.State.Status, oneLine(rc.State.Task, 80))
	}
	if !rc.State.Status.Terminal() {
		c.warnUnserved(cl, rc.Queue)
	}
	if rc.Duplicate && !f.json {
		if st := rc.State.Status; st.Terminal() {
			fmt.Fprintf(c.stderr, "job %s already ended (%s); not queued again: another --id runs it again\n", rc.ID, st)
		} else {
			fmt.Fprintf(c.stderr, "job %s was submitted before (%s); not queued again\n", rc.ID, st)
		}
	}
	if f.detach {
		if f.json {
			return exitOK, writeJSON(c.stdout, rc)
		}
		fmt.Fprintln(c.stdout, rc.ID)
		return exitOK, nil
	}
	localMCP := f.localMCP
	if rc.Duplicate {
		localMCP = "" // not served: see above
	}
	return c.follow(cl, rc.ID, f.json, localMCP)
}

// decodeJob checks a job as written (a --job file, a batch line) against
// the job schema and decodes it. Go's decoding alone would drop a
// misspelt field and reword a type error; the worker would dead-letter
// such a job, so it is refused here with the worker's own reason.
// taskElsewhere: the task comes from the command line or stdin, so the
// object need not have one.
func (c *cli) decodeJob(data []byte, taskElsewhere bool) (*jobs.Job, error) {
	if c.validator == nil {
		// The size limit is the job's as published (Submit checks it):
		// as written, each character may be a \uXXXX escape (Python's
		// json.dumps writes every non-ASCII one so), and a job that fits
		// was refused as "too large", measured in escapes.
		v, err := jobs.NewValidator(writtenLimit(c.settings.MaxJobBytes))
		if err != nil {
			return nil, err
		}
		c.validator = v
	}
	probe := data
	if taskElsewhere && !hasTask(data) {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) == nil && m != nil {
			m["task"] = json.RawMessage(`"task given elsewhere"`)
			// Without HTML escaping: json.Marshal would make each '<', '>'
			// and '&' of the file six bytes, and a job that fits refused
			// as too large.
			if b, err := jobs.EncodeNoEscape(m); err == nil {
				probe = b
			}
		}
	}
	if _, err := c.validator.DecodeJob(probe); err != nil {
		if errors.Is(err, jobs.ErrTooLarge) {
			// The validator's limit is writtenLimit's, which named as the
			// limit read as if JETAGENT_MAX_JOB_BYTES were six times what
			// it is.
			return nil, fmt.Errorf("%w: %d bytes as written, over six times the limit of %d bytes as published "+
				"(JETAGENT_MAX_JOB_BYTES; a \\uXXXX escape is six bytes for one)", jobs.ErrTooLarge, len(data), c.settings.MaxJobBytes)
		}
		return nil, err
	}
	var j jobs.Job
	if err := jobs.UnmarshalJob(data, &j); err != nil { // max_rounds 1.0 as the worker reads it
		return nil, err // the schema passed, so this is not expected
	}
	return &j, nil
}

// writtenLimit is the most bytes a job of at most maxJobBytes as published
// can take as written: six for each byte (a \u0041 for an A).
func writtenLimit(maxJobBytes int) int { return 6 * maxJobBytes }

// severalValues is a hint for a --job file that holds more than one JSON
// value, the first of them an object: a batch file given to --job, which
// was refused only as "invalid character after top-level value".
func severalValues(data []byte, name string) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	var first map[string]json.RawMessage
	if dec.Decode(&first) != nil || first == nil {
		return ""
	}
	if _, err := dec.Token(); errors.Is(err, io.EOF) {
		return ""
	}
	return fmt.Sprintf(" (the file goes on after its first JSON object: --job takes one job; a file of one job a line is a batch, --file %s)", name)
}

// hasTask reports whether data is a JSON object with a "task" member.
func hasTask(data []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	_, ok := m["task"]
	return ok
}

// warnUnserved says so on stderr when no worker has ever served queue: the
// job waits until one does, which looks like a hang otherwise.
func (c *cli) warnUnserved(cl *jobs.Client, queue string) {
	if served, err := cl.QueueServed(c.ctx, queue); err == nil && !served {
		fmt.Fprintf(c.stderr, "submit: warning: no worker has served queue %q yet; its jobs wait until a worker "+
			"with %q in JETAGENT_QUEUES starts%s\n", queue, queue, c.servedLike(cl, queue))
	}
}

// servedLike names the served queue that queue is probably a typo of ("":
// none is close).
func (c *cli) servedLike(cl *jobs.Client, queue string) string {
	queues, err := cl.ServedQueues(c.ctx)
	if err != nil {
		return ""
	}
	best := textdist.Closest(queue, queues)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean --queue %s?)", best)
}

// follow prints a job's events as they happen and its outcome at the end;
// localMCP: this submit answers the job's client tools from the local MCP
// servers of that file ("": it does not).
func (c *cli) follow(cl *jobs.Client, id string, asJSON bool, localMCP string) (int, error) {
	if !asJSON {
		fmt.Fprintf(c.stderr, "job %s\n", id)
	}
	events := 0
	stopOwner := c.watchOwner(cl, id)
	unanswered := localMCP != "" // told once
	st, err := cl.Watch(c.ctx, id, func(ev jobs.Event) {
		events++
		if asJSON {
			_ = writeJSON(c.stdout, map[string]any{"event": fullEvent(c.ctx, cl, ev)})
			return
		}
		fmt.Fprintln(c.stderr, formatEvent(ev))
		if !unanswered && ev.Type == "tool.result" && bytes.Contains(ev.Data, []byte("no submitter listening on "+clienttools.Subject(c.settings.Prefix, id))) {
			// A submit --local-mcp that was killed left the job's client
			// tools without an answerer; the failed call alone did not
			// say what to do.
			unanswered = true
			fmt.Fprintf(c.stderr, "submit: nothing answers the client tools of job %s (did the submit that declared them stop?); "+
				"each call fails after the worker's JETAGENT_CLIENT_TOOL_TIMEOUT. If it was submit --local-mcp FILE, "+
				"submit watch --local-mcp FILE %s answers them again\n", id, id)
		}
	})
	stopOwner()
	if err != nil {
		if c.ctx.Err() != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
			defer cancel()
			if _, serr := cl.Status(sctx, id); errors.Is(serr, jobs.ErrNotFound) {
				return exitFailed, fmt.Errorf("stopped waiting; no job %s was submitted meanwhile", id)
			}
			if localMCP != "" {
				// The job goes on, but nothing answers its client tools now.
				return exitFailed, fmt.Errorf("stopped following; job %s goes on, but its client tools (--local-mcp) are "+
					"answered no more: each call of one fails after the worker's JETAGENT_CLIENT_TOOL_TIMEOUT "+
					"(submit watch --local-mcp %s %s answers them again; submit cancel %s stops the job)", id, localMCP, id, id)
			}
			return exitFailed, fmt.Errorf("stopped following; job %s goes on (submit watch %s)", id, id)
		}
		return exitFailed, err
	}
	res, err := cl.FullResult(c.ctx, resultOf(st)) // an answer too large for the state
	if err != nil {
		return exitFailed, err
	}
	if events == 0 && !asJSON {
		// A job that ended longer ago than the events are kept showed
		// its answer under "job ID" and nothing else, as if it had none.
		fmt.Fprintf(c.stderr, "(no events of job %s are left: the workers keep them for JETAGENT_EVENTS_MAX_AGE, 24h by default)\n", id)
	}
	if asJSON {
		if err := writeJSON(c.stdout, map[string]any{"result": res}); err != nil {
			return exitFailed, err
		}
	} else if res.Status == jobs.StatusSucceeded {
		answer := res.Answer
		if isTerminal(c.stdout) {
			// A model's answer may carry what a tool fed it (terminal
			// sequences, U+202E); piped, it stays as the model wrote it.
			answer = shown(answer)
		}
		fmt.Fprintln(c.stdout, answer)
	} else {
		fmt.Fprintf(c.stderr, "job %s %s: %s\n", id, res.Status, shown(res.Error))
	}
	if res.Status != jobs.StatusSucceeded {
		return exitFailed, nil
	}
	return exitOK, nil
}

// fullEvent is ev with its data in full: an event too large for NATS
// carries a preview and a data_ref, a terminal event's result may carry an
// answer_ref or error_ref. When reading the full data fails, ev is kept as
// published (its references say where the data is).
func fullEvent(ctx context.Context, cl *jobs.Client, ev jobs.Event) jobs.Event {
	if d, err := cl.EventData(ctx, ev); err == nil {
		ev.Data = d
	}
	if !jobs.TerminalEvent(ev.Type) {
		return ev
	}
	var res jobs.Result
	if json.Unmarshal(ev.Data, &res) != nil || (res.AnswerRef == nil && res.ErrorRef == nil) {
		return ev
	}
	if full, err := cl.FullResult(ctx, &res); err == nil {
		if b, err := json.Marshal(full); err == nil {
			ev.Data = b
		}
	}
	return ev
}

// resultOf is a final state's result (built from the state if it has none).
func resultOf(st *jobs.State) *jobs.Result {
	if st.Result != nil {
		return st.Result
	}
	return &jobs.Result{ID: st.ID, Queue: st.Queue, Status: st.Status, Error: st.Error, Attempt: st.Attempt, Worker: st.Worker}
}

// serveLocalMCP declares the tools of local MCP servers as the job's
// client tools and answers the worker's calls until stop.
func (c *cli) serveLocalMCP(job *jobs.Job, path string) (stop func(), err error) {
	view, closeView, err := c.localMCP(job.ID, path)
	if err != nil {
		return nil, err
	}
	secret, err := clienttools.NewSecret()
	if err != nil {
		closeView()
		return nil, err
	}
	decls := clienttools.LocalMCPDecls(view)
	if len(decls) == 0 {
		// The job was queued with none, and the model did without the
		// tools asked for, as with a server that failed to start.
		closeView()
		return nil, fmt.Errorf("--local-mcp %s offers no tools (no server enabled, or none lists a tool): "+
			"enable one that does, or drop --local-mcp", path)
	}
	// The worker dead-letters a job whose declarations break these limits;
	// say so before publishing.
	if err := clienttools.ValidateDecls(decls, agentrun.DeclLimits()); err != nil {
		closeView()
		return nil, fmt.Errorf("--local-mcp %s: %w", path, err)
	}
	stop, err = c.answerLocalMCP(job.ID, secret, view, closeView)
	if err != nil {
		return nil, err
	}
	job.ClientSecret = secret
	job.ClientTools = append(job.ClientTools, decls...)
	return stop, nil
}

// localMCP starts the local MCP servers of the --local-mcp file path and
// opens a view of their tools for job id; closeView ends both.
func (c *cli) localMCP(id, path string) (view *toolcache.View, closeView func(), err error) {
	cfg, err := toolcache.LoadConfig(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--local-mcp %s: %w", path, cfgerr.InJSONFile(err, path)) // a syntax error's line
	}
	pool, err := toolcache.NewPool(c.ctx, cfg, toolcache.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		return nil, nil, fmt.Errorf("--local-mcp %s: %w", path, err)
	}
	// NewPool waited for each server's first attempt. One that failed was
	// left out without a word: the job ran without the tools asked for.
	for _, st := range pool.Status() {
		if st.State != toolcache.StateReady && st.State != toolcache.StateDisabled {
			_ = pool.Close()
			return nil, nil, fmt.Errorf("--local-mcp %s: server %q is not ready (%s: %s); fix it, or give it \"disabled\": true",
				path, st.Name, st.State, cmp.Or(strings.TrimSpace(st.Error), "no session"))
		}
	}
	view, err = pool.View(id, nil, nil, nil)
	if err != nil {
		_ = pool.Close()
		return nil, nil, err
	}
	return view, func() { _ = view.Close(); _ = pool.Close() }, nil
}

// answerLocalMCP answers job id's client tool calls signed with secret
// from view until stop, which also calls closeView (as does a failure).
func (c *cli) answerLocalMCP(id, secret string, view *toolcache.View, closeView func()) (stop func(), err error) {
	stopServe, err := clienttools.Serve(c.ctx, c.nc, id, secret, clienttools.LocalMCPHandler(view),
		clienttools.Options{Prefix: c.settings.Prefix, OnPanic: func(err error, stack []byte) {
			// The worker is answered with the panic's value; its stack is
			// for whoever runs submit.
			fmt.Fprintf(c.stderr, "submit: --local-mcp: %v\n%s", err, stack)
		}})
	if err != nil {
		closeView()
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			stopServe()
			closeView()
		})
	}, nil
}

// reattachLocalMCP answers, from the local MCP servers of path, the client
// tools of job st, which an earlier submit --local-mcp declared (and then
// stopped: killed, its machine restarted, Ctrl-C): the job's secret is
// read from the job's own message in the jobs stream, which the job's
// worker holds until the job ends. Who may read that stream holds every
// job's secret already (docs/CLIENT-TOOLS.md), so nothing is given away;
// the secret is never printed.
func (c *cli) reattachLocalMCP(cl *jobs.Client, st *jobs.State, path string) (stop func(), err error) {
	job, err := c.queuedJob(cl, st)
	if err != nil {
		return nil, fmt.Errorf("--local-mcp: the client secret of job %s cannot be read: %w", st.ID, err)
	}
	if job.ClientSecret == "" {
		return nil, usagef("--local-mcp: job %s declares no client tools: nothing to answer (drop --local-mcp)", st.ID)
	}
	view, closeView, err := c.localMCP(st.ID, path)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, d := range job.ClientTools {
		if _, ok := view.Registry().Get(d.Name); !ok {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(c.stderr, "submit: warning: job %s declares client tools that the servers of %s do not have: %s; "+
			"each call of one is answered as a tool error (is this the file the job was submitted with?)\n",
			st.ID, path, strings.Join(missing, ", "))
	}
	// A request nothing takes is told at once (no responders); one that
	// waits out the bound found a listener, which an answerer still
	// running would be: both would run each call.
	subject := clienttools.Subject(c.settings.Prefix, st.ID)
	pctx, cancel := context.WithTimeout(c.ctx, listenerProbe)
	_, perr := c.nc.RequestWithContext(pctx, subject, nil)
	cancel()
	if !errors.Is(perr, nats.ErrNoResponders) && c.ctx.Err() == nil {
		fmt.Fprintf(c.stderr, "submit: warning: something already listens on %s: the submit that declared job %s's client "+
			"tools, if it still runs (then both run each call: stop one of them), or a connection of it the NATS server "+
			"has not yet found gone\n", subject, st.ID)
	}
	return c.answerLocalMCP(st.ID, job.ClientSecret, view, closeView)
}

// listenerProbe bounds the look for another answerer of a job's client
// tools before submit watch --local-mcp answers them.
const listenerProbe = time.Second

// queuedJob is job st as published: its message in the jobs stream (the
// sequence its state names), which stays there until the job ends.
func (c *cli) queuedJob(cl *jobs.Client, st *jobs.State) (*jobs.Job, error) {
	stream := cl.Names().JobsStream()
	if st.StreamSeq == 0 {
		return nil, fmt.Errorf("its state names no message of %s (a job published without submit, not yet taken by a worker?)", stream)
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(c.ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	msg, err := s.GetMsg(c.ctx, st.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("its message (%s sequence %d) is no longer in the stream", stream, st.StreamSeq)
	}
	if err != nil {
		return nil, fmt.Errorf("its message (%s sequence %d): %w (reading it needs the permission to get messages of %s)",
			stream, st.StreamSeq, err, stream)
	}
	var job jobs.Job
	if err := jobs.UnmarshalJob(msg.Data, &job); err != nil {
		return nil, fmt.Errorf("its message (%s sequence %d): %w", stream, st.StreamSeq, err)
	}
	if id := cmp.Or(job.ID, msg.Header.Get(nats.MsgIdHdr)); id != st.ID {
		return nil, fmt.Errorf("%s sequence %d is job %q's message, not this job's", stream, st.StreamSeq, id)
	}
	return &job, nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// isTerminal reports whether x (stdin, stderr) is a terminal.
func isTerminal(x any) bool {
	f, ok := x.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// toolModes are the values of --mode (agentloop's modes; the job schema
// refuses any other).
var toolModes = []string{"auto", "full", "deferred", "search", "code"}

// foldMode is a --mode value in the case the job schema takes: the
// worker's JETAGENT_TOOL_MODE=FULL was taken, submit's --mode FULL was
// refused by the schema, after connecting. Other values stay as given,
// for the schema's error.
func foldMode(v string) string {
	for _, m := range toolModes {
		if strings.EqualFold(v, m) {
			return m
		}
	}
	return v
}
