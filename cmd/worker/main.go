package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/cfgerr"
	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/redact"
	"github.com/jetagent/jetagent/internal/telemetry"
	"github.com/jetagent/jetagent/internal/textdist"
	"github.com/jetagent/jetagent/internal/toolcache"
	"github.com/jetagent/jetagent/internal/toolcost"
)

func main() {
	if codemode.IsChild() { // code mode's child process (JETAGENT_CODE_SANDBOX=process)
		os.Exit(codemode.ServeChild(os.Stdin, os.Stdout))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: exit status from arguments.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	var err error
	switch cmd {
	case "-h", "-help", "--help", "help":
		// "worker help search-eval" is "worker search-eval --help".
		if len(args) > 1 && cmd == "help" && slices.Contains(subcommands, args[1]) {
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		err = writeUsage(stdout)
	case "tokens":
		err = tokens(args[1:], stdout, stderr)
	case "tools":
		err = tools(args[1:], stdout, stderr)
	case "search-eval":
		err = searchEval(args[1:], stdout, stderr)
	case "":
		err = serveFromEnv(stderr)
	default:
		hint := ""
		if near := textdist.Closest(cmd, append(slices.Clone(subcommands), "help")); near != "" {
			hint = fmt.Sprintf("; did you mean worker %s?", near)
		}
		fmt.Fprintf(stderr, "worker: unknown command %q%s (see worker --help)\n", cmd, hint)
		return 2
	}
	if errors.Is(err, errHelped) {
		return 0
	}
	if err != nil {
		if !errors.As(err, new(loggedError)) {
			fmt.Fprintf(stderr, "worker: %v\n", err)
		}
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	return 0
}

// flagHint adds to a flag package error for an undefined flag the flag of
// fs it is probably a typo of.
// subcommands are the worker's commands besides serving and help.
var subcommands = []string{"tokens", "tools", "search-eval"}

// parseFlags parses a subcommand's flags. -h and --help print its usage
// and flags on stdout and report errHelped, which run turns into exit 0:
// the flag package would call them an error ("flag: help requested").
func parseFlags(fs *flag.FlagSet, args []string, usage, about string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "usage: %s\n\n%s\n\nflags:\n", usage, about)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return errHelped
	}
	if err != nil {
		return usageError{fmt.Errorf("%s: %w (usage: %s)", fs.Name(), flagHint(fs, err), usage)}
	}
	return nil
}

// errHelped: a subcommand printed its help and did nothing else.
var errHelped = errors.New("help printed")

func flagHint(fs *flag.FlagSet, err error) error {
	_, name, ok := strings.Cut(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if near := textdist.Closest(strings.TrimLeft(name, "-"), names); near != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, near)
	}
	return err
}

func serveFromEnv(stderr io.Writer) error {
	s, err := loadSettings()
	if err != nil {
		// A setting meant but misspelt is the likeliest cause of a bad one
		// (OPENAI_BASEURL set, so OPENAI_API_KEY is required for OpenAI's).
		for _, n := range s.strays {
			if n.typo {
				err = fmt.Errorf("%w (%s)", err, n.msg)
			}
		}
		return logFailure(s.Config, stderr, err)
	}
	log := newLogger(s.Config, stderr)
	for _, n := range s.strays {
		log.Warn(n.msg)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	defer stop()
	// The shutdown notice is logged only on a signal, and before serve's
	// error: a worker that fails to start does not say it shuts down, and
	// nothing writes to stderr after this returns.
	served := make(chan struct{})
	var notice sync.WaitGroup
	notice.Go(func() {
		select {
		case <-served:
			return
		case <-ctx.Done():
		}
		stop() // a second signal now kills the process
		log.Info("shutting down: no new jobs; running jobs have the grace period, then go back to the queue",
			"grace", s.ShutdownGrace, "cause", context.Cause(ctx))
	})
	err = serve(ctx, s, log, nil)
	close(served)
	notice.Wait()
	return logFailure(s.Config, stderr, err)
}

// loggedError is an error the worker's log has already said.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// logFailure writes the error that stops the worker as a log line when
// the log is JSON (JETAGENT_LOG_FORMAT=json): it was the one plain
// "worker: ..." line among JSON ones, which a log pipeline parsing JSON
// could not read, and an alert on level ERROR missed. Text logs keep the
// plain line run writes.
func logFailure(c Config, stderr io.Writer, err error) error {
	if err == nil || c.LogFormat != "json" {
		return err
	}
	newLogger(c, stderr).Error("worker exits on an error", "err", err)
	return loggedError{err}
}

// stopSignals are the signals that stop the worker gracefully. SIGHUP
// (its terminal closed; `kill -HUP`, which makes nats-server reload its
// configuration) ended it at once, without a word: its jobs waited out
// the ack wait and a write in flight was reported interrupted, its effect
// unknown. The worker reads its configuration at start only, so a hangup
// stops it as SIGTERM does. A SIGHUP ignored at start (nohup) stays so.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

func newLogger(c Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		// Durations as the text format and the variables write them
		// ("30s"), not slog's JSON nanoseconds (30000000000).
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs the worker until ctx ends. ready, when set, is called with the
// worker once it takes jobs (for tests).
func serve(ctx context.Context, s Settings, log *slog.Logger, ready func(*jobs.Worker, *nats.Conn)) error {
	// A bad servers file is refused before anything starts.
	var mcpCfg toolcache.Config
	if s.MCPConfig != "" {
		var err error
		if mcpCfg, err = toolcache.LoadConfig(s.MCPConfig); err != nil {
			return fmt.Errorf("JETAGENT_MCP_CONFIG: %w", cfgerr.InJSONFile(err, s.MCPConfig)) // the error names the file, and the line of a syntax error
		}
	}
	// /metrics, /healthz and /readyz answer from the start, so that an
	// orchestrator sees the process alive (and not ready) while it waits
	// for NATS; the job and model metrics are registered once they exist.
	var st startState
	var reg *prometheus.Registry
	if s.MetricsAddr != "" {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		stopMetrics, err := serveMetrics(s, reg, readiness(ctx, &st), log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	var nc *nats.Conn
	if s.NATS.URL == "" {
		st.setStage("starting the embedded NATS server")
		ec := s.embedded()
		ec.Logger = log // the server's warnings and errors, in the worker's format
		ns, err := jobs.StartEmbedded(ec)
		if err != nil {
			return fmt.Errorf("embedded NATS (JETAGENT_DATA_DIR=%s, JETAGENT_LISTEN=%s): %w", s.DataDir, s.Listen, err)
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		log.Info("embedded NATS started", "url", ns.ClientURL(), "data_dir", s.DataDir, "auth", ec.AuthMode())
		if nc, err = jobs.ConnectEmbedded(ns, ec, "jetagent-worker"); err != nil {
			return err
		}
	} else {
		st.setStage("waiting for the NATS server (NATS_URL)")
		var err error
		if nc, err = connectNATS(ctx, s, log); err != nil || nc == nil {
			return err
		}
		log.Info("connected to NATS", "url", redact.URL(nc.ConnectedUrl())) // a token as the user part too
	}
	defer logNATSEvents(nc, log)()
	st.setStage("connected to NATS; starting")
	if err := fitMaxJobBytes(&s, nc, log); err != nil {
		return err
	}

	var pool *toolcache.Pool
	var known func(string) bool
	if s.MCPConfig != "" {
		// NewPool waits for each server's first attempt, up to
		// JETAGENT_MCP_CONNECT_TIMEOUT (an npx server may be downloaded
		// first): /readyz said only "connected to NATS; starting".
		st.setStage("connecting to the MCP servers (JETAGENT_MCP_CONFIG; at most JETAGENT_MCP_CONNECT_TIMEOUT=" +
			s.MCPConnectTimeout.String() + ")")
		var err error
		if pool, err = toolcache.NewPool(ctx, mcpCfg, toolcache.WithSettings(s.poolSettings()), toolcache.WithLogger(log)); err != nil {
			return fmt.Errorf("JETAGENT_MCP_CONFIG=%s: %w", s.MCPConfig, err)
		}
		defer pool.Close() //nolint:errcheck // at exit
		known = pool.HasServer
		st.setStage("connected to NATS and the MCP servers; starting")
		for _, st := range pool.Status() {
			attrs := []any{"name", st.Name, "state", st.State, "tools", st.Tools}
			if st.Error != "" {
				attrs = append(attrs, "error", st.Error)
			}
			log.Info("MCP server", attrs...)
		}
	}

	mc := s.llmConfig()
	mc.OnRetry = func(attempt int, delay time.Duration, err error) {
		log.Warn("model request failed; retrying", "attempt", attempt, "delay", delay, "err", err)
	}
	model, err := llm.New(mc)
	if err != nil {
		return named(err, llmVars)
	}
	if s.EmbeddingModel != "" {
		if pool == nil {
			log.Warn("JETAGENT_EMBEDDING_MODEL is set but JETAGENT_MCP_CONFIG is not: there are no tools to embed")
		} else if err := enableSemantic(ctx, s, nc, pool, log); err != nil {
			return err
		}
	}
	lc := s.loopConfig()
	if p, ok := lc.CodeRunner.(codemode.Process); ok {
		// Said at start, where the operator looks, rather than only to
		// the model at a job's first execute_code.
		if err := p.Check(ctx); err != nil && ctx.Err() == nil {
			log.Error("code mode cannot start its child process here, so every execute_code will fail; "+
				"JETAGENT_CODE_SANDBOX=in-process runs scripts inside the worker (a script that exhausts memory then ends the worker)", "err", err)
		}
	}
	lc.LLM, lc.Logger = model, log // a tool call's panic stack goes to the worker's log
	loop, err := agentloop.New(lc)
	if err != nil {
		return err
	}
	rc := s.runConfig()
	rc.Loop, rc.Pool, rc.Logger = loop, pool, log
	runner, err := agentrun.New(rc)
	if err != nil {
		return err
	}

	var metrics *jobs.Metrics
	var measured jobs.Runner = runner
	if reg != nil {
		if metrics, err = jobs.NewMetrics(reg); err != nil {
			return err
		}
		tm, err := telemetry.NewMetrics(reg, telemetry.Options{DefaultModel: s.OpenAI.Model, Pool: pool})
		if err != nil {
			return err
		}
		measured = tm.Runner(runner)
	}

	// Traces: exported over OTLP only when the standard OTEL_* endpoint
	// variables say where (telemetry.TracingEnabled); flushed at exit.
	if telemetry.TracingEnabled(os.Getenv) {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
		tp, stopTracing, err := telemetry.StartTracing(ctx, "jetagent-worker", os.Getenv)
		if err != nil {
			return err
		}
		defer func() {
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := stopTracing(fctx); err != nil {
				log.Warn("tracing: flush at exit failed", "err", err)
			}
		}()
		measured = telemetry.NewTracing(tp, telemetry.Options{DefaultModel: s.OpenAI.Model, Pool: pool}).Runner(measured)
		log.Info("tracing: exporting spans over OTLP")
	}

	jc := s.jobsConfig()
	jc.Conn, jc.Runner, jc.MaxJobBytes = nc, measured, s.MaxJobBytes
	jc.KnownServer, jc.Admit, jc.Metrics, jc.Logger = known, agentrun.Admit, metrics, log
	if pool != nil {
		jc.ServerNames = pool.Servers()
	}
	jc.Notes = jobNotes(lc, pool)
	w, err := jobs.NewWorker(jc)
	if err != nil {
		return err
	}
	st.running.Store(&runningParts{w: w, nc: nc, pool: pool})
	if ready != nil {
		go func() {
			select {
			case <-w.Ready():
				ready(w, nc)
			case <-ctx.Done():
			}
		}()
	}
	log.Info("worker starting", "worker", w.ID(), "model", s.OpenAI.Model, "base_url", redact.URL(s.OpenAI.BaseURL)) // a proxy's user:key@ stays out
	return w.Run(ctx)
}

// connectNATS connects to the server at NATS_URL, waiting for it while
// it does not accept connections, for JETAGENT_NATS_CONNECT_TIMEOUT (0:
// until ctx ends). Both results are nil when ctx ends first: the worker
// was stopped before it started, a normal shutdown.
func connectNATS(ctx context.Context, s Settings, log *slog.Logger) (*nats.Conn, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if d := s.NATSConnectTimeout; d > 0 {
		wctx, cancel = context.WithTimeoutCause(ctx, d, fmt.Errorf("not reachable within JETAGENT_NATS_CONNECT_TIMEOUT=%s", d))
	}
	defer cancel()
	nc, err := s.NATS.ConnectWait(wctx, "jetagent-worker", log)
	if err != nil && ctx.Err() != nil {
		log.Info("stopped while waiting for NATS", "last_error", err)
		return nil, nil
	}
	return nc, err
}

// enableSemantic turns on search_tools' hybrid ranking
// (JETAGENT_EMBEDDING_MODEL): tool vectors from the model endpoint's
// /embeddings, kept in the KV bucket <PREFIX>_VECTORS so that every worker
// embeds a tool text once. The pool computes them in the background per
// catalog version; searches use BM25F until they are ready.
func enableSemantic(ctx context.Context, s Settings, nc *nats.Conn, pool *toolcache.Pool, log *slog.Logger) error {
	ec := s.embedderConfig()
	ec.OnRetry = func(attempt int, delay time.Duration, err error) {
		log.Debug("embeddings request failed; retrying", "attempt", attempt, "delay", delay, "err", err)
	}
	emb, err := llm.NewEmbedder(ec, s.EmbeddingModel)
	if err != nil {
		return named(err, llmVars)
	}
	kv, err := vectorBucket(ctx, s, nc)
	if err != nil {
		return err
	}
	if err := pool.EnableSemantic(toolcache.SemanticConfig{Embedder: emb, Store: kvVectors{kv}, Logger: log, VectorWeight: s.EmbeddingWeight}); err != nil {
		return err
	}
	log.Info("tool search: hybrid ranking on", "embedding_model", s.EmbeddingModel, "vector_weight", s.EmbeddingWeight, "bucket", kv.Bucket())
	return nil
}

// vectorsBucket is the KV bucket of tool vectors: <PREFIX>_VECTORS, named
// like the state bucket (<PREFIX>_STATE).
func vectorsBucket(prefix string) string {
	return strings.TrimSuffix(jobs.Names{Prefix: prefix}.StateBucket(), "_STATE") + "_VECTORS"
}

// vectorBucket opens the tool vectors' bucket, creating it when no worker
// has (open first, then create: concurrent equal creates are answered as
// one, see jobs' ensureKeyValue). A vector is rewritten only with the same
// value, so one revision is kept.
func vectorBucket(ctx context.Context, s Settings, nc *nats.Conn) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	name := vectorsBucket(s.Prefix)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: "jetagent tool vectors for search_tools (JETAGENT_EMBEDDING_MODEL), by a hash of model and text",
			History: 1, Storage: jetstream.FileStorage, Replicas: s.Replicas,
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, name)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("key-value bucket %s (JETAGENT_EMBEDDING_MODEL): %w", name, err)
	}
	return kv, nil
}

// kvVectors is a toolcache.VectorStore on a NATS KV bucket.
type kvVectors struct{ kv jetstream.KeyValue }

// vectorOpTimeout bounds one read or write of a vector.
const vectorOpTimeout = 10 * time.Second

// Get reads key's vector; a value that does not decode counts as missing
// (it is computed and written again).
func (s kvVectors) Get(ctx context.Context, key string) ([]float32, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, vectorOpTimeout)
	defer cancel()
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v, err := toolcache.DecodeVector(e.Value())
	if err != nil {
		return nil, false, nil
	}
	return v, true, nil
}

// Put writes key's vector.
func (s kvVectors) Put(ctx context.Context, key string, v []float32) error {
	ctx, cancel := context.WithTimeout(ctx, vectorOpTimeout)
	defer cancel()
	_, err := s.kv.Put(ctx, key, toolcache.EncodeVector(v))
	return err
}

// fitMaxJobBytes checks JETAGENT_MAX_JOB_BYTES against the server's
// max_payload: jobs over it could never be published. A value set that way
// is an error, as any invalid setting; the default is lowered, logged at
// info: it equals a stock nats-server's max_payload (1 MiB), so it is
// lowered on every stock server, and a warning at each start for a
// setting nobody made would be noise.
func fitMaxJobBytes(s *Settings, nc *nats.Conn, log *slog.Logger) error {
	most := jobs.MaxJobBytesFor(nc)
	if s.MaxJobBytes <= most {
		return nil
	}
	if s.maxJobBytesSet || most < 1024 {
		return fmt.Errorf("invalid JETAGENT_MAX_JOB_BYTES=%d: the NATS server's max_payload is %d bytes, so jobs over %d "+
			"bytes (%d kept for headers) could not be published; lower JETAGENT_MAX_JOB_BYTES or raise the server's max_payload",
			s.MaxJobBytes, nc.MaxPayload(), most, jobs.JobHeaderRoom)
	}
	log.Info("JETAGENT_MAX_JOB_BYTES (unset) lowered to fit the NATS server's max_payload",
		"default", s.MaxJobBytes, "max_payload", nc.MaxPayload(), "max_job_bytes", most)
	s.MaxJobBytes = most
	return nil
}

// tokens prints the tool-definition tokens of captured catalog files.
func tokens(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokens", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // one line from run, not the flag package's usage dump as well
	md := fs.Bool("markdown", false, "print a Markdown table")
	if err := parseFlags(fs, args, "worker tokens [-markdown] CATALOG.json...",
		"The tool-definition tokens (o200k_base) of captured catalogs per tool mode: each file a\ntools/list result ({\"tools\": [...]}, as in ../shared/catalogs).", stdout); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("tokens: name at least one catalog file")}
	}
	s, err := loadToolSettings()
	if err != nil {
		return err
	}
	thresholds := s.loopConfig().AutoThresholds
	var rows []toolcost.Row
	for _, path := range fs.Args() {
		name, tools, skipped, err := toolcache.LoadCatalogAsServed(path)
		if err != nil {
			return err
		}
		noteSkipped(stderr, "tokens", path, skipped)
		if name == "" { // a bare tools array or tools/list result: named by its file, as search-eval does
			name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		}
		row, err := toolcost.Measure(name, tools, thresholds)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	return writeRows(stdout, rows, *md)
}

// tools prints the same for the live servers of JETAGENT_MCP_CONFIG.
func tools(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tools", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // one line from run, not the flag package's usage dump as well
	md := fs.Bool("markdown", false, "print a Markdown table")
	if err := parseFlags(fs, args, "worker tools [-markdown]",
		"The tool-definition tokens per tool mode of the live servers of JETAGENT_MCP_CONFIG.", stdout); err != nil {
		return err
	}
	s, err := loadToolSettings()
	if err != nil {
		return err
	}
	thresholds := s.loopConfig().AutoThresholds
	path := s.MCPConfig
	if path == "" {
		return errors.New("tools: set JETAGENT_MCP_CONFIG to the MCP servers file")
	}
	cfg, err := toolcache.LoadConfig(path)
	if err != nil {
		return fmt.Errorf("JETAGENT_MCP_CONFIG: %w", cfgerr.InJSONFile(err, path)) // the error names the file, and the line of a syntax error
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Warnings go to stderr: a tool definition the pool leaves out (and
	// why) is what someone checking a server's catalog wants to read.
	pool, err := toolcache.NewPool(ctx, cfg, toolcache.WithSettings(s.poolSettings()),
		toolcache.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		return err
	}
	defer pool.Close() //nolint:errcheck
	all := pool.Registry().List()
	var rows []toolcost.Row
	for _, st := range pool.Status() {
		var mine []toolcache.Tool
		for _, t := range all {
			if t.Server == st.Name {
				mine = append(mine, t)
			}
		}
		name, why := terminalSafe(st.Name), ""
		if st.Error != "" {
			why = terminalSafe(strings.TrimSpace(st.Error))
			// The text table names the state only: an error (a server's
			// stderr) in its first column padded every row to its width.
			if *md {
				name += " (" + why + ")"
			} else {
				name += " (" + string(st.State) + ")"
				why = ": " + why
			}
		}
		if !*md {
			// What the model sees of each tool in deferred mode.
			fmt.Fprintf(stdout, "%s: %s, %d tools%s\n", terminalSafe(st.Name), st.State, len(mine), why)
			for _, t := range mine {
				fmt.Fprintf(stdout, "  %-32s %s\n", terminalSafe(t.Name), terminalSafe(agentloop.OneLine(t.Description)))
			}
			fmt.Fprintln(stdout)
		}
		row, err := toolcost.Measure(name, mine, thresholds)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	// What one job naming no servers is sent: every server's tools, and
	// the loop's resource bridge when a server lists resources.
	view, err := pool.View("worker-tools", nil, nil, nil)
	if err != nil {
		return err
	}
	defer view.Close() //nolint:errcheck
	job := view.Tools()
	if res, err := view.ListResources(ctx); err == nil && len(res) > 0 {
		bridge := agentloop.ResourceBridge()
		if !*md {
			fmt.Fprintf(stdout, "resource bridge (added by the loop: %d resources listed), %d tools\n", len(res), len(bridge))
			for _, t := range bridge {
				fmt.Fprintf(stdout, "  %-32s %s\n", t.Name, agentloop.OneLine(t.Description))
			}
			fmt.Fprintln(stdout)
		}
		row, err := toolcost.Measure("resource bridge", bridge, thresholds)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		job = append(job, bridge...)
	}
	if len(rows) < 2 {
		return writeRows(stdout, rows, *md)
	}
	total, err := toolcost.Measure("total (one job, all servers)", job, thresholds)
	if err != nil {
		return err
	}
	rows = append(rows, total)
	if *md {
		return toolcost.WriteMarkdown(stdout, rows)
	}
	return toolcost.WriteText(stdout, rows)
}

// terminalSafe writes the control characters of s as Go escapes (\x1b,
// \u202e): what a server sends (a tool's description, its error) is
// shown, never obeyed. worker tools printed descriptions raw, so a server
// could retitle the operator's terminal, erase the line or hide text
// (ESC [8m) of the catalog being reviewed, or reorder it with a
// bidirectional override.
func terminalSafe(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }

func writeRows(w io.Writer, rows []toolcost.Row, markdown bool) error {
	if len(rows) > 1 {
		rows = append(rows, toolcost.Total(rows))
	}
	if markdown {
		return toolcost.WriteMarkdown(w, rows)
	}
	return toolcost.WriteText(w, rows)
}
