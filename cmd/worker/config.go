package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"
	"unicode"

	"github.com/kelseyhightower/envconfig"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/cfgerr"
	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/envvars"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/redact"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// envPrefix prefixes every jetagent variable. The standard NATS_* and
// OPENAI_* variables are read without it.
const envPrefix = "JETAGENT"

// Config is the worker's own configuration (JETAGENT_*). split_words
// derives each variable from the field name (AckWait: JETAGENT_ACK_WAIT)
// without an unprefixed fallback, so a stray LOG_LEVEL or QUEUES in the
// environment is never picked up.
type Config struct {
	DataDir string `split_words:"true" desc:"embedded NATS: JetStream store directory (used when NATS_URL is unset)"`
	Listen  string `desc:"embedded NATS: client listen address; submit and the nats CLI connect here"`
	// MaxStore bounds the embedded store (0: nats-server's default, 75%
	// of the disk space free at start, fixed until it restarts).
	MaxStore int64 `split_words:"true" desc:"embedded NATS: bytes the JetStream store may hold (0: 75% of the disk space free under JETAGENT_DATA_DIR when the worker starts, fixed until it restarts)"`
	// NATSConnectTimeout bounds the worker's wait for an external server
	// at start (0: it waits until stopped).
	NATSConnectTimeout time.Duration `envconfig:"NATS_CONNECT_TIMEOUT" desc:"how long the worker waits at start for the server at NATS_URL (to connect, then for JetStream to answer), retrying with backoff; bad credentials, TLS errors and a server without JetStream fail at once (0: until stopped)"`

	Prefix          string          `desc:"subject prefix of the wire contract (agent.jobs.<queue>, AGENT_JOBS, ...)"`
	Queues          []string        `desc:"queues this worker serves (comma-separated); each has one shared durable consumer"`
	WorkerID        string          `split_words:"true" desc:"worker id in job states and events (default: host name + random suffix)"`
	Concurrency     int             `desc:"jobs this worker runs at once; it fetches one job per free slot"`
	Replicas        int             `desc:"replicas of streams and buckets (3 on a NATS cluster)"`
	AckWait         time.Duration   `split_words:"true" desc:"redelivery delay of a job whose worker stopped heartbeating (crashed)"`
	Heartbeat       time.Duration   `desc:"interval of in-progress heartbeats for running jobs (0: a third of JETAGENT_ACK_WAIT)"`
	MaxDeliver      int             `split_words:"true" desc:"deliveries of one job before it is dead-lettered"`
	Backoff         []time.Duration `desc:"redelivery delays after successive ack timeouts, e.g. 30s,1m,5m (empty: JETAGENT_ACK_WAIT each time)"`
	RetryDelay      time.Duration   `split_words:"true" desc:"first delay before retrying a job after a transient error (doubles per attempt)"`
	RetryDelayMax   time.Duration   `split_words:"true" desc:"longest retry delay (a provider's Retry-After, when longer, is waited instead, at most 1h)"`
	ShutdownGrace   time.Duration   `split_words:"true" desc:"on SIGINT/SIGTERM/SIGHUP, how long running jobs may finish before they are handed back"`
	JobTimeout      time.Duration   `split_words:"true" desc:"timeout of a job that sets none"`
	MaxJobBytes     int             `split_words:"true" desc:"largest job payload accepted; larger ones are dead-lettered. Must fit the NATS server's max_payload less 4096 bytes for headers (unset: lowered to fit)"`
	DuplicateWindow time.Duration   `split_words:"true" desc:"a job id submitted again within this window is queued once"`
	EventsMaxAge    time.Duration   `split_words:"true" desc:"how long job events are kept"`
	DLQMaxAge       time.Duration   `split_words:"true" desc:"how long dead letters are kept (0: until purged)"`

	MCPConfig         string        `split_words:"true" desc:"path of the MCP servers file ({\"mcpServers\": {...}}); jobs name these servers (empty: no MCP servers)"`
	ToolMode          string        `split_words:"true" desc:"tool mode of jobs that set none: auto, full, deferred, search or code"`
	MaxRounds         int           `split_words:"true" desc:"LLM rounds of a job that sets no max_rounds"`
	MaxRoundsCap      int           `split_words:"true" desc:"upper bound of any job's max_rounds"`
	DeferredAbove     int           `split_words:"true" desc:"auto mode: defer tool schemas when the full definitions exceed this many tokens"`
	SearchAbove       int           `split_words:"true" desc:"auto mode: switch to search mode above this many tokens"`
	CodeAbove         int           `split_words:"true" desc:"auto mode: switch to code mode above this many tokens (0: auto never picks code mode)"`
	CodeTimeout       time.Duration `split_words:"true" desc:"code mode: wall time of one execute_code run, tool calls included"`
	CodeMaxCalls      int           `split_words:"true" desc:"code mode: tool calls one execute_code run may make"`
	CodeMaxOutput     int           `split_words:"true" desc:"code mode: bytes of printed output and final value returned to the model"`
	CodeMaxMemory     int64         `split_words:"true" desc:"code mode: bytes one execute_code run's heap may grow by (in a child process, its address space is bounded at 8 times this plus 256 MiB beyond the Go runtime's own reservations)"`
	CodeSandbox       string        `split_words:"true" desc:"code mode: where execute_code runs: process (a child process of the worker binary per run, about 10 ms; a script that exhausts memory ends only it) or in-process"`
	MaxToolOutput     int           `split_words:"true" desc:"bytes of a tool result shown to the model (the event keeps all)"`
	SystemPrompt      string        `split_words:"true" desc:"system prompt of jobs that set none"`
	ContentCalls      string        `split_words:"true" desc:"tool calls written into the reply text: read them (auto: when a reply has no tool_calls; on: always) or not (off); a default and MODEL-GLOB=MODE overrides, e.g. auto,gpt-4*=off,*qwen*=on"`
	ClientToolTimeout time.Duration `split_words:"true" desc:"how long a client tool call waits for the submitter's answer"`

	MCPConnectTimeout time.Duration `envconfig:"MCP_CONNECT_TIMEOUT" desc:"MCP: bound on one connection attempt (spawn or dial, handshake, first tools/list)"`
	MCPHealthInterval time.Duration `envconfig:"MCP_HEALTH_INTERVAL" desc:"MCP: how often each shared session is pinged (0: no health checks; else at least 1s)"`
	MCPHealthMisses   int           `envconfig:"MCP_HEALTH_MISSES" desc:"MCP: unanswered pings in a row (while the server answers nothing else) before its session is replaced"`
	MCPResyncInterval time.Duration `envconfig:"MCP_RESYNC_INTERVAL" desc:"MCP: how often tool lists are re-read without a list_changed notification (0: never; else at least 1s)"`
	MCPBackoffInitial time.Duration `envconfig:"MCP_BACKOFF_INITIAL" desc:"MCP: first delay before reconnecting a server that failed"`
	MCPBackoffMax     time.Duration `envconfig:"MCP_BACKOFF_MAX" desc:"MCP: longest delay between reconnection attempts"`

	EmbeddingModel string `split_words:"true" desc:"search_tools: embedding model at OPENAI_BASE_URL/embeddings for a hybrid ranking (BM25F fused with vector similarity); tool vectors are shared by the workers in the KV bucket <PREFIX>_VECTORS (empty: BM25F only)"`
	// EmbeddingWeight depends on the model: measure it with search-eval
	// --embed-weight (docs/BENCHMARKS.md).
	EmbeddingWeight float64 `split_words:"true" desc:"search_tools: the vector ranking's weight in the hybrid fusion, BM25F's being 1 (more than 0, at most 100; choose it with worker search-eval --embed-weight)"`

	MetricsAddr string `split_words:"true" desc:"address of /metrics (Prometheus), /healthz and /readyz, e.g. :9090 (empty: off)"`
	Pprof       bool   `envconfig:"PPROF" desc:"also serve Go's net/http/pprof profiles under /debug/pprof/ on JETAGENT_METRICS_ADDR (needs it; they show the process's internals)"`
	LogLevel    string `split_words:"true" desc:"debug, info, warn or error"`
	LogFormat   string `split_words:"true" desc:"text or json"`
}

// OpenAIConfig is the model endpoint, read from the variables OpenAI's
// own clients use.
type OpenAIConfig struct {
	APIKey  string `envconfig:"OPENAI_API_KEY" desc:"API key of the OpenAI-compatible endpoint (may be empty for local servers)"`
	BaseURL string `envconfig:"OPENAI_BASE_URL" desc:"base URL of the OpenAI-compatible chat-completions API, including /v1"`
	Model   string `envconfig:"OPENAI_MODEL" desc:"model of jobs that name none"`
}

// The defaults of OpenAIConfig, for the help (OpenAI's own clients'
// conventions; no library owns them).
const (
	defaultBaseURL = "https://api.openai.com/v1"
	defaultModel   = "gpt-4o-mini"
)

// Settings is everything the worker reads from the environment.
type Settings struct {
	Config
	NATS   jobs.NATSConfig
	OpenAI OpenAIConfig

	// maxJobBytesSet says JETAGENT_MAX_JOB_BYTES was set, not defaulted:
	// a value the server cannot carry is then an error, not lowered.
	maxJobBytesSet bool
	// strays are the variables set that look like settings but are read
	// by nothing (logged as warnings at start; strayVars).
	strays []strayNote
	// onMetrics, when set, is told the address /metrics, /healthz and
	// /readyz listen on (tests listen on port 0).
	onMetrics func(addr string)
}

// defaultSettings holds the libraries' defaults: the environment is read
// over them, so a variable left unset keeps the library's value and the
// help shows it. No default is declared here for what a library owns.
func defaultSettings() Settings {
	jc := jobs.Config{}.WithDefaults()
	lc := agentloop.Config{}.WithDefaults()
	rc := agentrun.Config{}.WithDefaults()
	pc := toolcache.DefaultSettings()
	t := jc.Topology
	return Settings{Config: Config{
		DataDir: "jetagent-data", Listen: "127.0.0.1:4222",
		Prefix: t.Names.Prefix, Queues: t.Queues, Replicas: t.Replicas,
		AckWait: t.AckWait, MaxDeliver: t.MaxDeliver, DuplicateWindow: t.DuplicateWindow,
		EventsMaxAge: t.EventsMaxAge, DLQMaxAge: t.DLQMaxAge,
		Concurrency: jc.Concurrency, RetryDelay: jc.RetryDelay, RetryDelayMax: jc.RetryDelayMax,
		ShutdownGrace: jc.ShutdownGrace, JobTimeout: jc.JobTimeout, MaxJobBytes: jobs.DefaultMaxJobBytes,
		ToolMode: string(lc.DefaultMode), MaxRounds: lc.DefaultMaxRounds, MaxRoundsCap: lc.MaxRoundsCap,
		DeferredAbove: lc.AutoThresholds.DeferredAbove, SearchAbove: lc.AutoThresholds.SearchAbove,
		CodeAbove: lc.AutoThresholds.CodeAbove, CodeTimeout: codemode.DefaultLimits.WallTime,
		CodeMaxCalls: codemode.DefaultLimits.MaxCalls, CodeMaxOutput: codemode.DefaultLimits.MaxOutput, CodeSandbox: "process",
		CodeMaxMemory:     codemode.DefaultLimits.MaxMemory,
		MaxToolOutput:     lc.MaxToolOutput,
		ContentCalls:      string(lc.ContentCalls.Default),
		ClientToolTimeout: rc.ClientToolTimeout,
		MCPConnectTimeout: pc.ConnectTimeout, MCPHealthInterval: pc.HealthInterval, MCPHealthMisses: pc.HealthMisses,
		MCPResyncInterval: pc.ResyncInterval, MCPBackoffInitial: pc.BackoffInitial, MCPBackoffMax: pc.BackoffMax,
		EmbeddingWeight: toolcache.DefaultVectorWeight,
		LogLevel:        "info", LogFormat: "text",
	}, OpenAI: OpenAIConfig{BaseURL: defaultBaseURL, Model: defaultModel}}
}

// jobsConfig is the jobs.Worker configuration the settings describe
// (without the connection, runner and hooks, which serve adds).
func (s Settings) jobsConfig() jobs.Config {
	c := s.Config
	cfg := jobs.Config{}.WithDefaults() // the fields no variable sets
	cfg.Topology = jobs.TopologyConfig{
		Names: jobs.Names{Prefix: c.Prefix}, Queues: c.Queues, Replicas: c.Replicas,
		DuplicateWindow: c.DuplicateWindow, EventsMaxAge: c.EventsMaxAge, DLQMaxAge: c.DLQMaxAge,
		AckWait: c.AckWait, MaxDeliver: c.MaxDeliver, BackOff: c.Backoff,
	}
	cfg.WorkerID, cfg.Concurrency, cfg.Heartbeat = c.WorkerID, c.Concurrency, c.Heartbeat
	cfg.RetryDelay, cfg.RetryDelayMax = c.RetryDelay, c.RetryDelayMax
	cfg.ShutdownGrace, cfg.JobTimeout = c.ShutdownGrace, c.JobTimeout
	cfg.StartTimeout = c.NATSConnectTimeout
	if s.maxJobBytesSet {
		cfg.MaxJobBytes = c.MaxJobBytes // else jobs fits its default to the server
	}
	return cfg
}

// loopConfig is the agent loop's configuration (without the model client).
func (s Settings) loopConfig() agentloop.Config {
	c := s.Config
	cfg := agentloop.Config{}.WithDefaults() // the fields no variable sets
	cfg.DefaultMode, cfg.MaxRoundsCap, cfg.DefaultMaxRounds = agentloop.Mode(c.ToolMode), c.MaxRoundsCap, c.MaxRounds
	cfg.AutoThresholds = agentloop.AutoThresholds{DeferredAbove: c.DeferredAbove, SearchAbove: c.SearchAbove, CodeAbove: c.CodeAbove}
	cfg.CodeLimits = codemode.Limits{WallTime: c.CodeTimeout, MaxCalls: c.CodeMaxCalls, MaxOutput: c.CodeMaxOutput, MaxMemory: c.CodeMaxMemory}
	if c.CodeSandbox == "process" {
		cfg.CodeRunner = codemode.Process{} // this binary: main serves the child
	}
	cfg.MaxToolOutput, cfg.DefaultSystem = c.MaxToolOutput, c.SystemPrompt
	cfg.ContentCalls = agentloop.ParseContentCalls(c.ContentCalls).WithDefaults()
	return cfg
}

// runConfig is the job runner's configuration (without loop and pool).
func (s Settings) runConfig() agentrun.Config {
	return agentrun.Config{Model: s.OpenAI.Model, ClientToolTimeout: s.ClientToolTimeout}
}

// llmConfig is the model client's configuration (without its hooks).
func (s Settings) llmConfig() llm.Config {
	return llm.Config{BaseURL: s.OpenAI.BaseURL, APIKey: s.OpenAI.APIKey, Model: s.OpenAI.Model}
}

// poolSettings is the MCP pool's configuration.
func (s Settings) poolSettings() toolcache.Settings {
	c := s.Config
	return toolcache.Settings{
		ConnectTimeout: c.MCPConnectTimeout, HealthInterval: c.MCPHealthInterval, HealthMisses: c.MCPHealthMisses,
		ResyncInterval: c.MCPResyncInterval, BackoffInitial: c.MCPBackoffInitial, BackoffMax: c.MCPBackoffMax,
	}
}

// The variable of each library field; a library's configuration error
// names the field, and the worker names the variable.
var (
	jobsVars = map[string]string{
		"Topology.Names.Prefix": "JETAGENT_PREFIX", "Topology.Queues": "JETAGENT_QUEUES",
		"Topology.Replicas": "JETAGENT_REPLICAS", "Topology.DuplicateWindow": "JETAGENT_DUPLICATE_WINDOW",
		"Topology.EventsMaxAge": "JETAGENT_EVENTS_MAX_AGE", "Topology.DLQMaxAge": "JETAGENT_DLQ_MAX_AGE",
		"Topology.AckWait": "JETAGENT_ACK_WAIT", "Topology.MaxDeliver": "JETAGENT_MAX_DELIVER",
		"Topology.BackOff": "JETAGENT_BACKOFF", "WorkerID": "JETAGENT_WORKER_ID",
		"Concurrency": "JETAGENT_CONCURRENCY", "Heartbeat": "JETAGENT_HEARTBEAT",
		"RetryDelay": "JETAGENT_RETRY_DELAY", "RetryDelayMax": "JETAGENT_RETRY_DELAY_MAX",
		"ShutdownGrace": "JETAGENT_SHUTDOWN_GRACE", "JobTimeout": "JETAGENT_JOB_TIMEOUT",
		"MaxJobBytes": "JETAGENT_MAX_JOB_BYTES", "StartTimeout": "JETAGENT_NATS_CONNECT_TIMEOUT",
	}
	loopVars = map[string]string{
		"DefaultMode": "JETAGENT_TOOL_MODE", "MaxRoundsCap": "JETAGENT_MAX_ROUNDS_CAP",
		"DefaultMaxRounds": "JETAGENT_MAX_ROUNDS", "AutoThresholds.DeferredAbove": "JETAGENT_DEFERRED_ABOVE",
		"AutoThresholds.SearchAbove": "JETAGENT_SEARCH_ABOVE", "MaxToolOutput": "JETAGENT_MAX_TOOL_OUTPUT",
		"AutoThresholds.CodeAbove": "JETAGENT_CODE_ABOVE", "CodeLimits.WallTime": "JETAGENT_CODE_TIMEOUT",
		"CodeLimits.MaxCalls": "JETAGENT_CODE_MAX_CALLS", "CodeLimits.MaxOutput": "JETAGENT_CODE_MAX_OUTPUT",
		"CodeLimits.MaxMemory": "JETAGENT_CODE_MAX_MEMORY",
		"ContentCalls.Default": "JETAGENT_CONTENT_CALLS", "ContentCalls.Models": "JETAGENT_CONTENT_CALLS",
	}
	runVars  = map[string]string{"ClientToolTimeout": "JETAGENT_CLIENT_TOOL_TIMEOUT"}
	llmVars  = map[string]string{"BaseURL": "OPENAI_BASE_URL", "Model": "OPENAI_MODEL"}
	poolVars = map[string]string{
		"ConnectTimeout": "JETAGENT_MCP_CONNECT_TIMEOUT", "HealthInterval": "JETAGENT_MCP_HEALTH_INTERVAL",
		"HealthMisses": "JETAGENT_MCP_HEALTH_MISSES", "ResyncInterval": "JETAGENT_MCP_RESYNC_INTERVAL",
		"BackoffInitial": "JETAGENT_MCP_BACKOFF_INITIAL", "BackoffMax": "JETAGENT_MCP_BACKOFF_MAX",
	}
)

// named rewrites a library's *cfgerr.FieldError into one that names the
// variable at fault, and the others involved with their values.
func named(err error, vars map[string]string) error {
	fe, ok := cfgerr.As(err)
	if !ok {
		return err
	}
	var names []string
	for _, f := range fe.Fields {
		if v, ok := vars[f]; ok {
			names = append(names, v)
		}
	}
	if len(names) == 0 {
		return err
	}
	// Msg names the other fields as Go does ("exceeds MaxRoundsCap 50"):
	// an operator sets variables, so it names those instead.
	text := fe.Msg
	for _, f := range fe.Fields {
		if v, ok := vars[f]; ok {
			base := f[strings.LastIndex(f, ".")+1:]
			text = regexp.MustCompile(`\b`+regexp.QuoteMeta(base)+`\b`).ReplaceAllLiteralString(text, v)
		}
	}
	msg := fmt.Sprintf("invalid %s: %s", names[0], text) // Msg gives the value
	if len(names) > 1 {
		others := make([]string, len(names)-1)
		for i, n := range names[1:] {
			others[i] = withValue(n)
		}
		msg += " (with " + strings.Join(others, ", ") + ")"
	}
	return errors.New(msg)
}

// withValue is "VAR=value" for a set variable, "VAR (default)" otherwise.
func withValue(variable string) string {
	if v, ok := os.LookupEnv(variable); ok {
		return variable + "=" + v
	}
	return variable + " (default)"
}

// loadSettings reads and validates the environment over the libraries'
// defaults, so every bad value is refused before anything starts. Errors
// name the variable at fault.
func loadSettings() (Settings, error) {
	s, err := readSettings()
	if err != nil {
		return s, err
	}
	return s, s.validate()
}

// loadToolSettings is loadSettings for the tools and tokens commands: it
// checks only what they use, not what a running worker needs (NATS, the
// model endpoint).
func loadToolSettings() (Settings, error) {
	s, err := readSettings()
	if err != nil {
		return s, err
	}
	return s, s.validateTools()
}

// typeWords is what a variable of a Go type takes, in an operator's words
// ("want []time.Duration" said it in Go's).
func typeWords(goType string) string {
	switch goType {
	case "int", "int32", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "time.Duration":
		return "a duration such as 30s, 5m or 1h"
	case "[]time.Duration":
		return "durations separated by commas, such as 30s,1m,5m"
	}
	return goType
}

// readSettings reads the environment over the libraries' defaults.
func readSettings() (Settings, error) {
	s := defaultSettings()
	for _, p := range []struct {
		prefix string
		spec   any
	}{{envPrefix, &s.Config}, {"", &s.NATS}, {"", &s.OpenAI}} {
		if err := envconfig.Process(p.prefix, p.spec); err != nil {
			var pe *envconfig.ParseError
			if errors.As(err, &pe) {
				return s, fmt.Errorf("invalid %s=%q: want %s (%w)", pe.KeyName, pe.Value, typeWords(pe.TypeName), pe.Err)
			}
			return s, err
		}
	}
	for i, q := range s.Queues { // "a, b" as other comma-separated variables (NATS_URL) take it
		s.Queues[i] = strings.TrimSpace(q)
	}
	// Enum-valued settings are taken in any case, as JETAGENT_LOG_LEVEL and
	// JETAGENT_CONTENT_CALLS always were: JETAGENT_LOG_FORMAT=JSON and
	// JETAGENT_TOOL_MODE=Search were refused. A value that is none of them
	// is left as written, for validate's error to quote.
	s.LogLevel = foldEnum(s.LogLevel, "debug", "info", "warn", "error")
	s.LogFormat = foldEnum(s.LogFormat, "text", "json")
	s.CodeSandbox = foldEnum(s.CodeSandbox, "process", "in-process")
	s.ToolMode = foldEnum(s.ToolMode, string(agentloop.ModeAuto), string(agentloop.ModeFull),
		string(agentloop.ModeDeferred), string(agentloop.ModeSearch), string(agentloop.ModeCode))
	_, s.maxJobBytesSet = os.LookupEnv(envPrefix + "_MAX_JOB_BYTES")
	strays, err := strayVars(os.Environ(), &s)
	if err != nil {
		return s, err
	}
	s.strays = strays
	return s, nil
}

// foldEnum is the value of values that v is in another case, or v.
func foldEnum(v string, values ...string) string {
	for _, want := range values {
		if strings.EqualFold(v, want) {
			return want
		}
	}
	return v
}

// strayNote is a warning about a variable; typo says it is close to one
// the worker reads.
type strayNote struct {
	msg  string
	typo bool
}

// strayVars checks environ for variables that look like settings but are
// read by nothing. A JETAGENT_ variable close to one of the worker's
// (JETAGENT_CONCURENCY) is refused: the worker would otherwise run with
// the default the operator meant to change. Any other JETAGENT_ variable,
// and a NATS_ or OPENAI_ variable close to one the worker reads
// (OPENAI_BASEURL: the model requests would go to the default endpoint),
// is returned as a warning.
func strayVars(environ []string, s *Settings) ([]strayNote, error) {
	var notes []strayNote
	for _, p := range []struct {
		prefix string
		spec   any
	}{{envPrefix, &s.Config}, {"NATS", &s.NATS}, {"OPENAI", &s.OpenAI}} {
		keyPrefix := envPrefix
		if p.prefix != envPrefix {
			keyPrefix = ""
		}
		known, err := envvars.Keys(keyPrefix, p.spec)
		if err != nil {
			return nil, err
		}
		if p.prefix != envPrefix {
			known = append(known, envvars.Neighbours()...)
		}
		for _, st := range envvars.Strays(environ, p.prefix+"_", known) {
			switch {
			case p.prefix == envPrefix && st.Suggest != "":
				return nil, fmt.Errorf("unknown variable %s: did you mean %s? (worker --help lists the variables)", st.Name, st.Suggest)
			case st.Suggest != "":
				notes = append(notes, strayNote{fmt.Sprintf("%s is set but not read: did you mean %s?", st.Name, st.Suggest), true})
			case p.prefix == envPrefix:
				notes = append(notes, strayNote{fmt.Sprintf("%s is set but is no worker setting (worker --help lists them); it is ignored", st.Name), false})
			}
		}
	}
	// The embedded server's own settings do nothing beside NATS_URL: a
	// JETAGENT_LISTEN=0.0.0.0:4222 meant to open the worker to the network
	// went unnoticed.
	if lookupEnv(environ, "NATS_URL") != "" {
		for _, v := range []string{envPrefix + "_LISTEN", envPrefix + "_DATA_DIR", envPrefix + "_MAX_STORE"} {
			if lookupEnv(environ, v) != "" {
				notes = append(notes, strayNote{fmt.Sprintf("%s is set but so is NATS_URL: it configures the embedded "+
					"NATS server, which is started only with NATS_URL unset; it is ignored", v), false})
			}
		}
	}
	return notes, nil
}

// lookupEnv is the value of key in environ ("" when unset).
func lookupEnv(environ []string, key string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// validateTools checks what the tools and tokens commands use.
func (s Settings) validateTools() error {
	if err := s.loopConfig().Validate(); err != nil {
		return named(err, loopVars)
	}
	if err := s.poolSettings().Validate(); err != nil {
		return named(err, poolVars)
	}
	// toolcache.Settings.Validate refuses an interval between 0 and
	// toolcache.MinInterval (1s): named says it by variable.
	return nil
}

// sameListener reports whether two listen addresses take the same port
// on a common interface (an empty or unspecified host is every one).
func sameListener(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	every := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || every(ha) || every(hb) || (isLocal(ha) && isLocal(hb))
}

// isLocal: the names of loopback that listen on the same interface.
func isLocal(h string) bool { return h == "localhost" || h == "127.0.0.1" }

// minMaxStore is the smallest JETAGENT_MAX_STORE: a few jobs of the
// largest size (8 MiB) with their events would fill less.
const minMaxStore = 64 << 20

func (s Settings) validate() error {
	c := s.Config
	bad := func(v, format string, a ...any) error {
		return fmt.Errorf("invalid %s: %s", v, fmt.Sprintf(format, a...))
	}
	if s.NATS.URL == "" {
		if c.DataDir == "" {
			return bad("JETAGENT_DATA_DIR", "must not be empty when NATS_URL is unset")
		}
		if err := checkDataDir(c.DataDir); err != nil {
			return err
		}
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return bad("JETAGENT_LISTEN", "%q is not host:port", c.Listen)
		}
		if c.MaxStore < 0 || (c.MaxStore > 0 && c.MaxStore < minMaxStore) {
			return bad("JETAGENT_MAX_STORE", "%d bytes: want 0 (75%% of the disk space free at start) or at least %d (64 MiB)", c.MaxStore, minMaxStore)
		}
		if err := s.validateEmbeddedAuth(); err != nil {
			return err
		}
		if c.MetricsAddr != "" && sameListener(c.MetricsAddr, c.Listen) {
			// The metrics listener starts first and takes the port; the
			// embedded server's failure then blamed another worker's NATS.
			return bad("JETAGENT_METRICS_ADDR", "%s is the embedded NATS server's port (JETAGENT_LISTEN=%s): give them different ports", c.MetricsAddr, c.Listen)
		}
	}
	if err := s.NATS.Validate(); err != nil {
		return err
	}
	if s.maxJobBytesSet && c.MaxJobBytes == 0 {
		// jobs reads 0 as its default: an explicit 0 (meant as no limit)
		// ran with 1 MiB without a word.
		return bad("JETAGENT_MAX_JOB_BYTES", "must be positive (got 0; unset, the default is %d, lowered to fit the server's max_payload)", jobs.DefaultMaxJobBytes)
	}
	if err := s.jobsConfig().Validate(); err != nil {
		return named(err, jobsVars)
	}
	for i, q := range c.Queues {
		if slices.Contains(c.Queues[:i], q) { // it was served twice, and logged as queues="[a a]"
			return bad("JETAGENT_QUEUES", "%q is named twice", q)
		}
	}
	// 0 is codemode's "the default" (30s, 200, 20000): JETAGENT_CODE_MAX_CALLS=0,
	// meant as no tool calls from code, ran with 200 without a word.
	for _, v := range []struct {
		name     string
		got, def any
		bad      bool
	}{
		{"JETAGENT_CODE_TIMEOUT", c.CodeTimeout, codemode.DefaultLimits.WallTime, c.CodeTimeout <= 0},
		{"JETAGENT_CODE_MAX_CALLS", c.CodeMaxCalls, codemode.DefaultLimits.MaxCalls, c.CodeMaxCalls <= 0},
		{"JETAGENT_CODE_MAX_OUTPUT", c.CodeMaxOutput, codemode.DefaultLimits.MaxOutput, c.CodeMaxOutput <= 0},
	} {
		if v.bad {
			return bad(v.name, "must be positive (got %v; unset, the default is %v)", v.got, v.def)
		}
	}
	if c.CodeMaxMemory < 16<<20 || c.CodeMaxMemory > 64<<30 {
		return bad("JETAGENT_CODE_MAX_MEMORY", "must be 16 MiB to 64 GiB in bytes (got %d; unset, the default is %d)", c.CodeMaxMemory, codemode.DefaultLimits.MaxMemory)
	}
	if err := s.validateTools(); err != nil {
		return err
	}
	if err := s.runConfig().Validate(); err != nil {
		return named(err, runVars)
	}
	switch c.LogLevel { // in any case: readSettings folded it
	case "debug", "info", "warn", "error":
	default:
		return bad("JETAGENT_LOG_LEVEL", "%q is not debug, info, warn or error", c.LogLevel)
	}
	if c.CodeSandbox != "process" && c.CodeSandbox != "in-process" {
		return bad("JETAGENT_CODE_SANDBOX", "%q is not process or in-process", c.CodeSandbox)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return bad("JETAGENT_LOG_FORMAT", "%q is not text or json", c.LogFormat)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return bad("JETAGENT_METRICS_ADDR", "%q is not host:port", c.MetricsAddr)
		}
	}
	if c.Pprof && c.MetricsAddr == "" {
		return bad("JETAGENT_PPROF", "true needs JETAGENT_METRICS_ADDR: profiles are served on the metrics listener")
	}
	if err := s.llmConfig().Validate(); err != nil {
		return named(err, llmVars)
	}
	if s.OpenAI.APIKey == "" && strings.Contains(s.OpenAI.BaseURL, "api.openai.com") {
		return bad("OPENAI_API_KEY", "is required for %s", redact.URL(s.OpenAI.BaseURL))
	}
	if m := c.EmbeddingModel; m != "" && (strings.TrimSpace(m) != m || strings.ContainsFunc(m, unicode.IsControl)) {
		return bad("JETAGENT_EMBEDDING_MODEL", "%q has leading or trailing spaces or control characters", m)
	}
	if toolcache.CheckVectorWeight(c.EmbeddingWeight) != nil {
		return bad("JETAGENT_EMBEDDING_WEIGHT", "%v: want more than 0 and at most %d", c.EmbeddingWeight, toolcache.MaxVectorWeight)
	}
	return nil
}

// checkDataDir refuses a JETAGENT_DATA_DIR that is the jetstream
// directory inside a store (JETAGENT_DATA_DIR=jetagent-data/jetstream,
// where the files are): it holds account directories ($G) and no
// jetstream directory of its own. nats-server takes that for its layout
// before 2.2.3 and moves the accounts one level down, into
// jetstream/jetstream: a worker on the right directory then found an
// empty store (every job, state and transcript hidden), and one running
// on it had its files moved from under it (their locks are two files).
func checkDataDir(dir string) error {
	if own, _ := os.ReadDir(filepath.Join(dir, "jetstream")); len(own) > 0 {
		return nil // a store: nats-server moves nothing
	}
	for _, account := range []string{"$G", "$SYS"} {
		if fi, err := os.Stat(filepath.Join(dir, account)); err == nil && fi.IsDir() {
			return fmt.Errorf("invalid JETAGENT_DATA_DIR=%s: it holds a JetStream account directory (%s) itself: it is "+
				"the jetstream directory inside a store, so give the directory above it (%s); the embedded NATS "+
				"server would move this store one level down, where a worker on that directory no longer finds it",
				dir, account, filepath.Dir(filepath.Clean(dir)))
		}
	}
	return nil
}

// embedderConfig is the embedding client's configuration: the model
// client's endpoint (the model is JETAGENT_EMBEDDING_MODEL).
func (s Settings) embedderConfig() llm.Config { return s.llmConfig() }

// validateEmbeddedAuth checks the NATS_* variables as the embedded
// server's own authentication (NATS_URL unset).
func (s Settings) validateEmbeddedAuth() error {
	n := s.NATS
	switch {
	case n.Creds != "":
		return errors.New("invalid NATS_CREDS: set but NATS_URL is not; the embedded NATS server does not " +
			"support operator (JWT) mode: use NATS_USER and NATS_PASSWORD or NATS_TOKEN with it, or run " +
			"nats-server in operator mode yourself and point NATS_URL at it")
	case n.User != "" && n.Password == "" && n.Token == "":
		// The embedded server would then let in anyone giving that user
		// name with no password, beyond loopback too (the check below
		// counts a user as authentication).
		return errors.New("invalid NATS_USER: set without NATS_PASSWORD; the embedded NATS server would let in " +
			"any client giving that user name: set NATS_PASSWORD too, or use NATS_TOKEN instead")
	case s.Replicas > 1:
		// Else the worker stopped at the first stream with the server's
		// "replicas > 1 not supported in non-clustered mode".
		return fmt.Errorf("invalid JETAGENT_REPLICAS=%d: the embedded NATS server (NATS_URL unset) is a single node, "+
			"which keeps one replica; more need a NATS cluster: point NATS_URL at it", s.Replicas)
	case n.CA != "" && n.Cert == "":
		return errors.New("invalid NATS_CA: with NATS_URL unset it is the CA the embedded NATS verifies client " +
			"certificates with, which needs NATS_CERT and NATS_KEY (the server's certificate)")
	}
	for _, f := range []struct{ variable, path string }{{"NATS_CERT", n.Cert}, {"NATS_KEY", n.Key}, {"NATS_CA", n.CA}} {
		if f.path == "" {
			continue
		}
		if _, err := os.ReadFile(f.path); err != nil {
			return fmt.Errorf("invalid %s (the embedded NATS server's TLS): %w", f.variable, err)
		}
	}
	if !jobs.LoopbackListen(s.Listen) && s.embedded().Open() {
		return fmt.Errorf("invalid JETAGENT_LISTEN=%s: not a loopback address, so the embedded NATS would "+
			"accept anyone on the network: set NATS_USER and NATS_PASSWORD, or NATS_TOKEN (or NATS_CERT, "+
			"NATS_KEY and NATS_CA for mutual TLS); clients (submit, nats) use the same variables; or listen "+
			"on 127.0.0.1", s.Listen)
	}
	return nil
}

// embedded is the embedded server's configuration: the NATS_* variables
// set how clients must authenticate.
func (s Settings) embedded() jobs.EmbeddedConfig {
	n := s.NATS
	return jobs.EmbeddedConfig{
		DataDir: s.DataDir, Listen: s.Listen, MaxStore: s.MaxStore,
		User: n.User, Password: n.Password, Token: n.Token,
		Cert: n.Cert, Key: n.Key, ClientCA: n.CA,
	}
}

// usageTemplate prints a variable, its default (the value of the spec
// passed, which holds the libraries' defaults) and its meaning.
var usageTemplate = template.Must(template.New("usage").Funcs(template.FuncMap{
	"value": usageValue,
}).Parse(`{{range .}}{{.Key}}	{{value .Field}}	{{.Tags.Get "desc"}}
{{end}}`))

// usageValue formats a default for the help: "-" when there is none.
func usageValue(v reflect.Value) string {
	if v.IsZero() {
		return "-"
	}
	switch x := v.Interface().(type) {
	case []string:
		return strings.Join(x, ",")
	case []time.Duration:
		parts := make([]string, len(x))
		for i, d := range x {
			parts[i] = d.String()
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v.Interface())
}

// writeUsage prints every variable with its default and meaning.
func writeUsage(w io.Writer) error {
	fmt.Fprint(w, `worker runs jetagent jobs from NATS JetStream.

Usage:
  worker                    run the worker (configured by the environment below)
  worker tokens [-markdown] CATALOG.json...
                            tool-definition tokens per tool mode of captured catalogs
  worker tools [-markdown]  the same for the live servers of JETAGENT_MCP_CONFIG
  worker search-eval [--json] [--k 1,5,10] [--half choose|report] [--misses] [--embed-model M [--embed-weight W]] QUERIES.jsonl CATALOG.json...
                            recall@k and hit@k of the tool search on a retrieval set
  worker -h | --help        this help

With NATS_URL unset the worker starts an embedded NATS server with
JetStream (store in JETAGENT_DATA_DIR, clients on JETAGENT_LISTEN), so
submit and the nats CLI work with no set-up. With NATS_URL set it waits
at start until that server takes connections and JetStream answers
(retried with backoff, bounded by JETAGENT_NATS_CONNECT_TIMEOUT; bad
credentials, TLS errors and a server without JetStream stop it at once).
SIGINT/SIGTERM stop it gracefully, and so does SIGHUP (unless ignored
at start, as nohup does): the configuration is read at start only, so
restart the worker to change it. A second signal stops it at once.

The embedded server asks clients for what the NATS_* variables say:
NATS_USER and NATS_PASSWORD, or NATS_TOKEN; NATS_CERT and NATS_KEY are
its TLS certificate, and with NATS_CA clients must present a certificate
that CA signed. submit and the nats CLI connect with the same variables.
A JETAGENT_LISTEN beyond loopback (e.g. 0.0.0.0:4222) is refused unless
one of these authenticates clients. NATS_CREDS (operator/JWT mode) needs
an external server (NATS_URL).

Traces (OpenTelemetry, GenAI conventions: a span per job attempt, model
request and tool call) are exported over OTLP/HTTP only when
OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
the SDK reads the other OTEL_* variables itself (OTEL_SERVICE_NAME,
default jetagent-worker; OTEL_EXPORTER_OTLP_HEADERS, ...). A traceparent
header on a job message makes the job span its child.

Environment (variable, default, meaning):

`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	def := defaultSettings()
	for _, p := range []struct {
		title, prefix string
		spec          any
	}{
		{"NATS connection", "", &def.NATS},
		{"Model endpoint", "", &def.OpenAI},
		{"Worker", envPrefix, &def.Config},
	} {
		fmt.Fprintf(tw, "%s:\t\t\n", p.title)
		if err := envconfig.Usaget(p.prefix, p.spec, tw, usageTemplate); err != nil {
			return err
		}
		fmt.Fprintln(tw, "\t\t")
	}
	return tw.Flush()
}
