package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/kelseyhightower/envconfig"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
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
}

// run is main without the process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		c.usage(stdout)
		return exitOK
	}
	if err := c.loadEnv(); err != nil {
		fmt.Fprintf(stderr, "submit: %v\n", err)
		return exitUsage
	}
	cmd, rest := "", args
	if len(args) > 0 {
		switch args[0] {
		case "status", "watch", "transcript", "cancel":
			cmd, rest = args[0], args[1:]
		}
	}
	var code int
	var err error
	switch cmd {
	case "":
		code, err = c.submit(rest)
	case "status":
		code, err = c.status(rest)
	case "watch":
		code, err = c.watch(rest)
	case "transcript":
		code, err = c.transcript(rest)
	case "cancel":
		code, err = c.cancel(rest)
	}
	if c.nc != nil {
		c.nc.Close()
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "submit: %v (see submit --help)\n", err)
		return exitUsage
	case errors.Is(err, flag.ErrHelp):
		c.usage(stdout)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "submit: %v\n", err)
		return exitFailed
	}
	return code
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func (c *cli) loadEnv() error {
	if err := envconfig.Process("JETAGENT", &c.settings); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			return fmt.Errorf("invalid %s=%q: want %s", pe.KeyName, pe.Value, pe.TypeName)
		}
		return err
	}
	if err := envconfig.Process("", &c.natsCfg); err != nil {
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

// connect opens the NATS connection and the client on first use.
func (c *cli) connect() (*jobs.Client, error) {
	if c.client != nil {
		return c.client, nil
	}
	nc, err := c.natsCfg.Connect("jetagent-submit")
	if err != nil {
		if c.natsCfg.URL == "" {
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

// parseInterspersed parses flags that may follow positional arguments
// (submit "task" --detach) and returns the positionals; everything after
// "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return pos, nil
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, `submit sends tasks to jetagent workers over NATS JetStream and follows them.

Usage:
  submit [flags] "task"          submit a task (or read it from stdin), follow its
                                 events and print the final answer
  submit [flags] --file FILE     submit a batch: one job per line (a JSON job object
                                 or a JSON string task); progress on stderr
  submit status ID               the job's state
  submit watch ID                follow a job's events until it ends
  submit transcript ID [--raw]   the stored transcript (reflected; --raw: what the
                                 model saw)
  submit cancel ID               cancel a job and wait until it has stopped

Flags of submit:
  --id ID              job id (default: a new ULID); resubmitting an id within
                       the duplicate window does not queue it twice
  --queue NAME         queue (default "default")
  --model NAME         model override
  --system TEXT        system prompt override
  --mode MODE          tool mode: auto, full, deferred, search, code
  --servers a,b        MCP servers from the operator's configuration (default: all)
  --allow GLOBS        tool name globs to allow (comma-separated)
  --deny GLOBS         tool name globs to deny (comma-separated)
  --max-rounds N       LLM rounds limit
  --timeout DUR        job timeout, e.g. 90s, 5m
  --meta k=v           metadata (repeatable)
  --job FILE           a whole job as JSON (the flags above override its fields)
  --local-mcp FILE     offer the tools of these local MCP servers (same file
                       format as the worker's) as client tools, answered here
  --detach             print the job id and return without following (batch:
                       submit every line and write receipts, without waiting)
  --file FILE          batch mode ("-" reads stdin)
  --parallel N         batch: jobs in flight at once (default 8)
  --out FILE           batch: write one result (JSON, with its "line") per job
  --json               machine-readable output (JSON lines) everywhere

Ctrl-C stops following, not the job (submit watch ID resumes; submit cancel
ID stops it); an interrupted batch submits no further lines.

Exit status: 0 when the job (every batch job) succeeded, 1 when one did not or
on error, 2 on a usage error.

Environment (variable, default, meaning):
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	tmpl := "{{range .}}  {{usage_key .}}\t{{with usage_default .}}{{.}}{{else}}-{{end}}\t{{usage_description .}}\n{{end}}"
	_ = envconfig.Usagef("", &jobs.NATSConfig{}, tw, tmpl)
	_ = envconfig.Usagef("JETAGENT", &Settings{}, tw, tmpl)
	_ = tw.Flush()
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

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
