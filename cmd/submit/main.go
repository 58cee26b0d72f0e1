package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/jetagent/jetagent/internal/envvars"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/textdist"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the first Ctrl-C winds down; a second one kills at once
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1 // the job (or a batch job) did not succeed, or an error
	exitUsage  = 2
)

// Settings is what submit reads from the environment.
type Settings struct {
	Prefix      string `default:"agent" desc:"subject prefix of the wire contract (must match the workers')"`
	MaxJobBytes int    `split_words:"true" default:"1048576" desc:"largest job payload (must match the workers')"`
}

type cli struct {
	ctx            context.Context
	stdin          io.Reader
	stdout, stderr io.Writer
	settings       Settings
	natsCfg        jobs.NATSConfig
	nc             *nats.Conn
	client         *jobs.Client
	validator      *jobs.Validator // of job files and batch lines, made on first use
	resultsBroken  atomic.Bool     // a batch's results could not be written: submit no more lines
}

// run is main without the process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// stderr is also written by nats.go's goroutine (AsyncErrorHandler).
	stderr = &lockedWriter{w: stderr}
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	cmds := c.commands()
	cmd, rest := cmds[0], args
	if len(args) > 0 {
		if args[0] == "help" { // submit help [COMMAND]
			help := cmds[0]
			if len(args) > 1 {
				help = findCommand(cmds, args[1])
				if help == cmds[0] && args[1] != "submit" {
					// "help stauts" printed the whole help, exit 0, as if asked for it.
					var names []string
					for _, k := range cmds[1:] {
						names = append(names, k.name)
					}
					meant := ""
					if best := textdist.Closest(args[1], names); best != "" {
						meant = fmt.Sprintf(": did you mean submit help %s?", best)
					}
					fmt.Fprintf(stderr, "submit: help: no command %q%s (commands: %s; see submit --help)\n",
						args[1], meant, strings.Join(names, ", "))
					return exitUsage
				}
			}
			c.usage(stdout, cmds, help)
			return exitOK
		}
		// A command's name selects it only as the first argument: a task
		// that begins with one is given after --, or quoted (after a flag, a
		// command's name and one id are refused: notACommand).
		if k := findCommand(cmds, args[0]); k != cmds[0] {
			cmd, rest = k, args[1:]
		}
	}
	var endTrace func(int, error)
	c.ctx, endTrace = startTrace(c.ctx, cmd.name, stderr)
	code, err := c.runCommand(cmd, rest)
	endTrace(code, err)
	if c.nc != nil {
		c.nc.Close()
	}
	var ue usageError
	var ee envError
	switch {
	case errors.Is(err, pflag.ErrHelp):
		c.usage(stdout, cmds, cmd)
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "submit: %v (see submit --help)\n", err)
		return exitUsage
	case errors.As(err, &ee):
		fmt.Fprintf(stderr, "submit: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "submit: %v\n", err)
		return exitFailed
	}
	return code
}

// A command is one form of the command line: submitting a task or a batch
// (name ""), or a subcommand. Its flags are defined once; parsing and the
// help both come from them.
type command struct {
	name  string
	use   string // what follows the name in the help
	short string // what it does, for the help
	flags *pflag.FlagSet
	run   func(pos []string) (int, error) // after the flags parsed and the environment loaded
}

func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // run reports a parse error once
	fs.Usage = func() {}     // and prints the help on --help
	fs.SortFlags = false     // the help lists them as defined
	return fs
}

func (c *cli) commands() []*command {
	return []*command{
		c.submitCommand(),
		c.idCommand("status", "the job's state", nil, c.status),
		c.watchCommand(),
		c.transcriptCommand(),
		c.idCommand("cancel", "cancel a job and wait until it has stopped", nil, c.cancel),
	}
}

// findCommand is the subcommand called name, or the submitting command.
func findCommand(cmds []*command, name string) *command {
	for _, k := range cmds[1:] {
		if k.name == name {
			return k
		}
	}
	return cmds[0]
}

// runCommand parses cmd's flags (interspersed with its arguments; after
// "--" everything is an argument), loads the environment and runs it.
func (c *cli) runCommand(cmd *command, args []string) (int, error) {
	if err := cmd.flags.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, err
		}
		if hint := c.elsewhere(cmd, err); hint != nil {
			return 0, hint
		}
		return 0, flagError(cmd.flags, err)
	}
	if err := c.loadEnv(); err != nil {
		return 0, envError{err}
	}
	return cmd.run(cmd.flags.Args())
}

// usageError is a command line submit cannot act on (exit 2, with a
// pointer to the help).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// flagError is a flag parse error as a usage error. A long flag given with
// one dash (-json, as Go's flag package allowed) parses as shorthands,
// which submit has none of; the error says how to write it.
func flagError(fs *pflag.FlagSet, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		if name, _, _ := strings.Cut(ne.GetSpecifiedShortnames(), "="); len(name) > 1 && fs.Lookup(name) != nil {
			return usagef("%w: a long flag takes two dashes: --%s", err, name)
		}
		if sn := ne.GetSpecifiedShortnames(); sn != "" && fs.Name() != "submit" && jobs.ValidID("-"+sn) {
			// Job ids may start with a dash (a publisher's, or --id -x):
			// "submit status -x" was refused as an unknown shorthand 'x'.
			return usagef("%w: a job id that starts with a dash goes after --: submit %s -- -%s", err, fs.Name(), sn)
		}
		if name := ne.GetSpecifiedName(); name != "" {
			var names []string
			fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
			if best := textdist.Closest(name, names); best != "" {
				return usagef("%w: did you mean --%s?", err, best)
			}
		}
	}
	return usageError{err}
}

// elsewhere names the command an unknown flag belongs to: "submit --watch
// ID" (a command given as a flag) and "submit --wait ID" or "submit status
// --raw ID" (another command's flag) were refused as unknown flags only,
// or with a flag of this command that is near in spelling.
func (c *cli) elsewhere(cmd *command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || ne.GetSpecifiedName() == "" {
		return nil
	}
	name, _, _ := strings.Cut(ne.GetSpecifiedName(), "=")
	var owners []string
	for _, k := range c.commands()[1:] {
		switch {
		case k.name == name:
			return usagef("%w: %s is a command, given first: submit %s ID", err, name, name)
		case k != cmd && k.flags.Lookup(name) != nil:
			owners = append(owners, k.name)
		}
	}
	if len(owners) == 0 {
		return nil
	}
	return usagef("%w: --%s is a flag of %s: submit %s --%s ...", err, name, strings.Join(owners, ", "), owners[0], name)
}

// envError is an environment submit cannot run with (exit 2).
type envError struct{ err error }

func (e envError) Error() string { return e.err.Error() }
func (e envError) Unwrap() error { return e.err }

func (c *cli) loadEnv() error {
	if err := envconfig.Process("JETAGENT", &c.settings); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			want := pe.TypeName
			if want == "int" { // its one number, JETAGENT_MAX_JOB_BYTES, in words rather than Go's
				want = "an integer (bytes)"
			}
			return fmt.Errorf("invalid %s=%q: want %s", pe.KeyName, pe.Value, want)
		}
		return err
	}
	if err := envconfig.Process("", &c.natsCfg); err != nil {
		return err
	}
	if err := c.strayVars(os.Environ()); err != nil {
		return err
	}
	if _, err := jobs.NewNames(c.settings.Prefix); err != nil {
		return fmt.Errorf("invalid JETAGENT_PREFIX: %w", err)
	}
	if c.settings.MaxJobBytes < 1024 {
		return fmt.Errorf("invalid JETAGENT_MAX_JOB_BYTES: must be at least 1024 (got %d)", c.settings.MaxJobBytes)
	}
	return c.natsCfg.Validate()
}

// strayVars refuses a JETAGENT_ variable close to one of submit's own
// (JETAGENT_PREFX: the jobs would go to the default prefix, where no
// worker of that prefix looks) and warns of a NATS_ variable close to one
// it reads. Other JETAGENT_ variables are the workers' and are left alone.
func (c *cli) strayVars(environ []string) error {
	known, err := envvars.Keys("JETAGENT", &c.settings)
	if err != nil {
		return err
	}
	for _, st := range envvars.Strays(environ, "JETAGENT_", known) {
		if st.Suggest != "" {
			return fmt.Errorf("unknown variable %s: did you mean %s? (submit --help lists the variables)", st.Name, st.Suggest)
		}
	}
	if known, err = envvars.Keys("", &c.natsCfg); err != nil {
		return err
	}
	for _, st := range envvars.Strays(environ, "NATS_", append(known, envvars.Neighbours()...)) {
		if st.Suggest != "" {
			fmt.Fprintf(c.stderr, "submit: warning: %s is set but not read: did you mean %s?\n", st.Name, st.Suggest)
		}
	}
	return nil
}

// connect opens the NATS connection and the client on first use.
func (c *cli) connect() (*jobs.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	// What NATS reports asynchronously (a watcher that lost its server)
	// is said once a minute in submit's voice, not as nats.go's bare
	// lines, dozens while the server is away.
	//
	// A lost connection is said when it drops and when it is back: submit
	// following a job said nothing while its server was away, then, half
	// a minute on, only "nats: consumer not active" (the watch's missed
	// heartbeats, which the outage explains; not repeated while it lasts).
	var down struct {
		sync.Mutex
		since time.Time
	}
	nc, err := c.natsCfg.Connect("jetagent-submit",
		nats.ErrorHandler(jobs.AsyncErrorHandler(func(err error, _ string, repeated int) {
			down.Lock()
			away := !down.since.IsZero()
			down.Unlock()
			if away && errors.Is(err, nats.ErrConsumerNotActive) {
				return
			}
			more := ""
			if repeated > 0 {
				more = fmt.Sprintf(" (%d more times)", repeated)
			}
			fmt.Fprintf(c.stderr, "submit: NATS: %v%s\n", err, more)
		})),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() { // submit closing it
				return
			}
			down.Lock()
			down.since = time.Now()
			down.Unlock()
			why := ""
			if err != nil {
				why = fmt.Sprintf(" (%v)", err)
			}
			fmt.Fprintf(c.stderr, "submit: NATS connection lost%s; reconnecting (jobs go on meanwhile; Ctrl-C stops waiting)\n", why)
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			down.Lock()
			away := time.Since(down.since)
			down.since = time.Time{}
			down.Unlock()
			fmt.Fprintf(c.stderr, "submit: NATS connection restored after %s\n", away.Round(100*time.Millisecond))
		}))
	if err != nil {
		switch {
		case errors.Is(err, nats.ErrAuthorization):
			// "nats: Authorization Violation" alone did not say which
			// variables submit sends credentials from.
			err = fmt.Errorf("%w (%s)", err, c.authHint())
		case c.natsCfg.URL == "":
			err = fmt.Errorf("%w (is a worker with embedded NATS running? otherwise set NATS_URL)", err)
		}
		return nil, err
	}
	c.nc = nc
	cl, err := jobs.NewClient(c.ctx, nc, jobs.ClientConfig{Prefix: c.settings.Prefix, MaxJobBytes: c.settings.MaxJobBytes})
	if err != nil {
		return nil, err
	}
	c.client = cl
	return cl, nil
}

// authHint says what submit presented to a server that refused it.
func (c *cli) authHint() string {
	var set []string
	for _, v := range []struct{ name, value string }{
		{"NATS_USER", c.natsCfg.User}, {"NATS_PASSWORD", c.natsCfg.Password}, {"NATS_TOKEN", c.natsCfg.Token},
		{"NATS_CREDS", c.natsCfg.Creds}, {"NATS_CERT", c.natsCfg.Cert},
	} {
		if v.value != "" {
			set = append(set, v.name)
		}
	}
	if len(set) == 0 {
		return "the server wants credentials and none are set: give submit the ones the worker's server takes, " +
			"NATS_USER and NATS_PASSWORD, NATS_TOKEN, NATS_CREDS or NATS_CERT and NATS_KEY"
	}
	return "the server refused the credentials of " + strings.Join(set, ", ")
}

// longHelp is the help's description of the command line; the flags and
// the environment are listed from their definitions after it.
const longHelp = `submit sends tasks to jetagent workers over NATS JetStream and follows them.

Usage:
  submit [flags] "task"          submit a task (or read it from stdin), follow its
                                 events and print the final answer
  submit [flags] -- status ...   a task that begins with a command's name
  submit [flags] --file FILE     submit a batch: one job per line (a JSON job object
                                 or a JSON string task); progress on stderr
  submit status ID               the job's state
  submit watch ID                follow a job's events until it ends
  submit transcript ID [--raw]   the stored transcript (reflected; --raw: what the
                                 model saw)
  submit cancel ID               cancel a job and wait until it has stopped
  submit help [COMMAND]          this help, or a command's

Flags may come before or after the arguments.
`

const footHelp = `Ctrl-C stops following, not the job (submit watch ID resumes; submit cancel
ID stops it); an interrupted batch submits no further lines.

Exit status: following a job (submit, watch) or a batch, 0 when the job (every
batch job) succeeded and 1 when one did not; --detach, status and transcript,
0 when they print what was asked; cancel, 0 once the job is cancelled and 1
when it had ended otherwise; 1 on any error, 2 on a usage error.
`

// helpWidth is where flag descriptions wrap.
const helpWidth = 80

// usage prints the help of cmd: for submitting, the whole help (every
// command and flag, and the environment); for a subcommand, its own.
func (c *cli) usage(w io.Writer, cmds []*command, cmd *command) {
	if cmd.name != "" {
		fmt.Fprintf(w, "submit %s %s: %s\n\nFlags:\n%s\nsubmit --help lists every command, flag and environment variable.\n",
			cmd.name, cmd.use, cmd.short, cmd.flags.FlagUsagesWrapped(helpWidth))
		return
	}
	fmt.Fprintf(w, "%s\nFlags of submit:\n%s\n", longHelp, cmd.flags.FlagUsagesWrapped(helpWidth))
	// Subcommands with the same flags share a list.
	var order []string
	names := map[string][]string{}
	for _, k := range cmds[1:] {
		u := k.flags.FlagUsagesWrapped(helpWidth)
		if names[u] == nil {
			order = append(order, u)
		}
		names[u] = append(names[u], k.name)
	}
	for _, u := range order {
		fmt.Fprintf(w, "Flags of %s:\n%s\n", strings.Join(names[u], ", "), u)
	}
	fmt.Fprintf(w, "%s\nEnvironment (variable, default, meaning):\n", footHelp)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	tmpl := "{{range .}}  {{usage_key .}}\t{{with usage_default .}}{{.}}{{else}}-{{end}}\t{{usage_description .}}\n{{end}}"
	_ = envconfig.Usagef("", &jobs.NATSConfig{}, tw, tmpl)
	_ = envconfig.Usagef("JETAGENT", &Settings{}, tw, tmpl)
	_ = tw.Flush()
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// lockedWriter serialises writes from several goroutines. Fd is the
// underlying file's, so isTerminal still sees a terminal.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Fd() uintptr {
	if f, ok := l.w.(interface{ Fd() uintptr }); ok {
		return f.Fd()
	}
	return ^uintptr(0) // no file: term.IsTerminal says no
}
