package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
)

// envPrefix prefixes every jetagent variable. The standard NATS_* and
// OPENAI_* variables are read without it.
const envPrefix = "JETAGENT"

// Config is the worker's own configuration (JETAGENT_*). split_words
// derives each variable from the field name (AckWait: JETAGENT_ACK_WAIT)
// without an unprefixed fallback, so a stray LOG_LEVEL or QUEUES in the
// environment is never picked up.
type Config struct {
	DataDir string `split_words:"true" default:"jetagent-data" desc:"embedded NATS: JetStream store directory (used when NATS_URL is unset)"`
	Listen  string `default:"127.0.0.1:4222" desc:"embedded NATS: client listen address; submit and the nats CLI connect here"`

	Prefix          string          `default:"agent" desc:"subject prefix of the wire contract (agent.jobs.<queue>, AGENT_JOBS, ...)"`
	Queues          []string        `default:"default" desc:"queues this worker serves (comma-separated); each has one shared durable consumer"`
	WorkerID        string          `split_words:"true" desc:"worker id in job states and events (default: host name + random suffix)"`
	Concurrency     int             `default:"4" desc:"jobs this worker runs at once; it fetches one job per free slot"`
	Replicas        int             `default:"1" desc:"replicas of streams and buckets (3 on a NATS cluster)"`
	AckWait         time.Duration   `split_words:"true" default:"30s" desc:"redelivery delay of a job whose worker stopped heartbeating (crashed)"`
	Heartbeat       time.Duration   `desc:"interval of in-progress heartbeats for running jobs (0: a third of JETAGENT_ACK_WAIT)"`
	MaxDeliver      int             `split_words:"true" default:"5" desc:"deliveries of one job before it is dead-lettered"`
	Backoff         []time.Duration `desc:"redelivery delays after successive ack timeouts, e.g. 30s,1m,5m (empty: JETAGENT_ACK_WAIT each time)"`
	RetryDelay      time.Duration   `split_words:"true" default:"2s" desc:"first delay before retrying a job after a transient error (doubles per attempt)"`
	RetryDelayMax   time.Duration   `split_words:"true" default:"1m" desc:"longest retry delay"`
	ShutdownGrace   time.Duration   `split_words:"true" default:"30s" desc:"on SIGINT/SIGTERM, how long running jobs may finish before they are handed back"`
	JobTimeout      time.Duration   `split_words:"true" default:"10m" desc:"timeout of a job that sets none"`
	MaxJobBytes     int             `split_words:"true" default:"1048576" desc:"largest job payload accepted; larger ones are dead-lettered. Must fit the NATS server's max_payload less 4096 bytes for headers (unset: lowered to fit)"`
	DuplicateWindow time.Duration   `split_words:"true" default:"1h" desc:"a job id submitted again within this window is queued once"`
	EventsMaxAge    time.Duration   `split_words:"true" default:"24h" desc:"how long job events are kept"`
	DLQMaxAge       time.Duration   `split_words:"true" default:"0" desc:"how long dead letters are kept (0: until purged)"`

	MCPConfig         string        `split_words:"true" desc:"path of the MCP servers file ({\"mcpServers\": {...}}); jobs name these servers (empty: no MCP servers)"`
	ToolMode          string        `split_words:"true" default:"auto" desc:"tool mode of jobs that set none: auto, full, deferred or search"`
	MaxRounds         int           `split_words:"true" default:"10" desc:"LLM rounds of a job that sets no max_rounds"`
	MaxRoundsCap      int           `split_words:"true" default:"50" desc:"upper bound of any job's max_rounds"`
	DeferredAbove     int           `split_words:"true" default:"3000" desc:"auto mode: defer tool schemas when the full definitions exceed this many tokens"`
	SearchAbove       int           `split_words:"true" default:"25000" desc:"auto mode: switch to search mode above this many tokens"`
	MaxToolOutput     int           `split_words:"true" default:"16384" desc:"bytes of a tool result shown to the model (the event keeps all)"`
	SystemPrompt      string        `split_words:"true" desc:"system prompt of jobs that set none"`
	ClientToolTimeout time.Duration `split_words:"true" default:"60s" desc:"how long a client tool call waits for the submitter's answer"`

	MetricsAddr string `split_words:"true" desc:"address of the Prometheus /metrics endpoint, e.g. :9090 (empty: off)"`
	LogLevel    string `split_words:"true" default:"info" desc:"debug, info, warn or error"`
	LogFormat   string `split_words:"true" default:"text" desc:"text or json"`
}

// OpenAIConfig is the model endpoint, read from the variables OpenAI's
// own clients use.
type OpenAIConfig struct {
	APIKey  string `envconfig:"OPENAI_API_KEY" desc:"API key of the OpenAI-compatible endpoint (may be empty for local servers)"`
	BaseURL string `envconfig:"OPENAI_BASE_URL" default:"https://api.openai.com/v1" desc:"base URL of the OpenAI-compatible chat-completions API, including /v1"`
	Model   string `envconfig:"OPENAI_MODEL" default:"gpt-4o-mini" desc:"model of jobs that name none"`
}

// Settings is everything the worker reads from the environment.
type Settings struct {
	Config
	NATS   jobs.NATSConfig
	OpenAI OpenAIConfig

	// maxJobBytesSet says JETAGENT_MAX_JOB_BYTES was set, not defaulted:
	// a value the server cannot carry is then an error, not lowered.
	maxJobBytesSet bool
}

// loadSettings reads and validates the environment. Errors name the
// variable at fault.
func loadSettings() (Settings, error) {
	var s Settings
	for _, p := range []struct {
		prefix string
		spec   any
	}{{envPrefix, &s.Config}, {"", &s.NATS}, {"", &s.OpenAI}} {
		if err := envconfig.Process(p.prefix, p.spec); err != nil {
			var pe *envconfig.ParseError
			if errors.As(err, &pe) {
				return s, fmt.Errorf("invalid %s=%q: want %s (%v)", pe.KeyName, pe.Value, pe.TypeName, pe.Err)
			}
			return s, err
		}
	}
	_, s.maxJobBytesSet = os.LookupEnv(envPrefix + "_MAX_JOB_BYTES")
	return s, s.validate()
}

func (s Settings) validate() error {
	c := s.Config
	bad := func(v, format string, a ...any) error {
		return fmt.Errorf("invalid %s: %s", v, fmt.Sprintf(format, a...))
	}
	if s.NATS.URL == "" {
		if c.DataDir == "" {
			return bad("JETAGENT_DATA_DIR", "must not be empty when NATS_URL is unset")
		}
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			return bad("JETAGENT_LISTEN", "%q is not host:port", c.Listen)
		}
		if err := s.validateEmbeddedAuth(); err != nil {
			return err
		}
	}
	if err := s.NATS.Validate(); err != nil {
		return err
	}
	if _, err := jobs.NewNames(c.Prefix); err != nil {
		return bad("JETAGENT_PREFIX", "%q: letters, digits, _ and - only", c.Prefix)
	}
	if len(c.Queues) == 0 {
		return bad("JETAGENT_QUEUES", "name at least one queue")
	}
	for _, q := range c.Queues {
		if !jobs.ValidQueue(q) {
			return bad("JETAGENT_QUEUES", "%q is not a queue name (letters, digits, _ and -)", q)
		}
	}
	if c.WorkerID != "" && !jobs.ValidID(c.WorkerID) {
		return bad("JETAGENT_WORKER_ID", "%q: letters, digits, _ and - only", c.WorkerID)
	}
	switch {
	case c.Concurrency < 1:
		return bad("JETAGENT_CONCURRENCY", "must be at least 1 (got %d)", c.Concurrency)
	case c.Replicas < 1 || c.Replicas > 5:
		return bad("JETAGENT_REPLICAS", "must be 1 to 5 (got %d)", c.Replicas)
	case c.AckWait < time.Second:
		return bad("JETAGENT_ACK_WAIT", "must be at least 1s (got %s)", c.AckWait)
	case c.Heartbeat < 0 || (c.Heartbeat > 0 && c.Heartbeat >= c.AckWait):
		return bad("JETAGENT_HEARTBEAT", "must be below JETAGENT_ACK_WAIT (got %s)", c.Heartbeat)
	case c.MaxDeliver < 1:
		return bad("JETAGENT_MAX_DELIVER", "must be at least 1 (got %d)", c.MaxDeliver)
	case len(c.Backoff) > c.MaxDeliver:
		return bad("JETAGENT_BACKOFF", "%d steps exceed JETAGENT_MAX_DELIVER=%d", len(c.Backoff), c.MaxDeliver)
	case c.RetryDelay <= 0:
		return bad("JETAGENT_RETRY_DELAY", "must be positive")
	case c.RetryDelayMax < c.RetryDelay:
		return bad("JETAGENT_RETRY_DELAY_MAX", "must not be below JETAGENT_RETRY_DELAY")
	case c.ShutdownGrace <= 0:
		return bad("JETAGENT_SHUTDOWN_GRACE", "must be positive")
	case c.JobTimeout <= 0:
		return bad("JETAGENT_JOB_TIMEOUT", "must be positive")
	case c.MaxJobBytes < 1024:
		return bad("JETAGENT_MAX_JOB_BYTES", "must be at least 1024 (got %d)", c.MaxJobBytes)
	case c.DuplicateWindow <= 0:
		return bad("JETAGENT_DUPLICATE_WINDOW", "must be positive")
	case c.EventsMaxAge <= 0:
		return bad("JETAGENT_EVENTS_MAX_AGE", "must be positive")
	case c.DLQMaxAge < 0:
		return bad("JETAGENT_DLQ_MAX_AGE", "must not be negative")
	case !agentloop.Mode(c.ToolMode).Valid():
		return bad("JETAGENT_TOOL_MODE", "%q is not auto, full, deferred or search", c.ToolMode)
	case agentloop.Mode(c.ToolMode) == agentloop.ModeCode:
		// Every job that sets no mode would fail: refuse now instead.
		return bad("JETAGENT_TOOL_MODE", "code mode is not available yet; use auto, full, deferred or search")
	case c.MaxRounds < 1:
		return bad("JETAGENT_MAX_ROUNDS", "must be at least 1")
	case c.MaxRoundsCap < c.MaxRounds:
		return bad("JETAGENT_MAX_ROUNDS_CAP", "must not be below JETAGENT_MAX_ROUNDS=%d", c.MaxRounds)
	case c.DeferredAbove < 1:
		return bad("JETAGENT_DEFERRED_ABOVE", "must be positive")
	case c.SearchAbove < c.DeferredAbove:
		return bad("JETAGENT_SEARCH_ABOVE", "must not be below JETAGENT_DEFERRED_ABOVE=%d", c.DeferredAbove)
	case c.MaxToolOutput < 256:
		return bad("JETAGENT_MAX_TOOL_OUTPUT", "must be at least 256")
	case c.ClientToolTimeout <= 0:
		return bad("JETAGENT_CLIENT_TOOL_TIMEOUT", "must be positive")
	}
	for _, d := range c.Backoff {
		if d < time.Second {
			return bad("JETAGENT_BACKOFF", "steps must be at least 1s (got %s)", d)
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		return bad("JETAGENT_LOG_LEVEL", "%q is not debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return bad("JETAGENT_LOG_FORMAT", "%q is not text or json", c.LogFormat)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return bad("JETAGENT_METRICS_ADDR", "%q is not host:port", c.MetricsAddr)
		}
	}
	if u, err := url.Parse(s.OpenAI.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("OPENAI_BASE_URL", "%q is not an http(s) URL", s.OpenAI.BaseURL)
	}
	if strings.TrimSpace(s.OpenAI.Model) == "" {
		return bad("OPENAI_MODEL", "must not be empty")
	}
	if s.OpenAI.APIKey == "" && strings.Contains(s.OpenAI.BaseURL, "api.openai.com") {
		return bad("OPENAI_API_KEY", "is required for %s", s.OpenAI.BaseURL)
	}
	return nil
}

// validateEmbeddedAuth checks the NATS_* variables as the embedded
// server's own authentication (NATS_URL unset).
func (s Settings) validateEmbeddedAuth() error {
	n := s.NATS
	switch {
	case n.Creds != "":
		return errors.New("invalid NATS_CREDS: set but NATS_URL is not; the embedded NATS server does not " +
			"support operator (JWT) mode: use NATS_USER and NATS_PASSWORD or NATS_TOKEN with it, or run " +
			"nats-server in operator mode yourself and point NATS_URL at it")
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
		DataDir: s.DataDir, Listen: s.Listen,
		User: n.User, Password: n.Password, Token: n.Token,
		Cert: n.Cert, Key: n.Key, ClientCA: n.CA,
	}
}

const usageTemplate = `{{range .}}{{usage_key .}}	{{with usage_default .}}{{.}}{{else}}-{{end}}	{{usage_description .}}
{{end}}`

// writeUsage prints every variable with its default and meaning.
func writeUsage(w io.Writer) error {
	fmt.Fprint(w, `worker runs jetagent jobs from NATS JetStream.

Usage:
  worker                    run the worker (configured by the environment below)
  worker tokens [-markdown] CATALOG.json...
                            tool-definition tokens per tool mode of captured catalogs
  worker tools [-markdown]  the same for the live servers of JETAGENT_MCP_CONFIG
  worker -h | --help        this help

With NATS_URL unset the worker starts an embedded NATS server with
JetStream (store in JETAGENT_DATA_DIR, clients on JETAGENT_LISTEN), so
submit and the nats CLI work with no set-up. SIGINT/SIGTERM stop it
gracefully; a second signal stops it at once.

The embedded server asks clients for what the NATS_* variables say:
NATS_USER and NATS_PASSWORD, or NATS_TOKEN; NATS_CERT and NATS_KEY are
its TLS certificate, and with NATS_CA clients must present a certificate
that CA signed. submit and the nats CLI connect with the same variables.
A JETAGENT_LISTEN beyond loopback (e.g. 0.0.0.0:4222) is refused unless
one of these authenticates clients. NATS_CREDS (operator/JWT mode) needs
an external server (NATS_URL).

Environment (variable, default, meaning):

`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range []struct {
		title, prefix string
		spec          any
	}{
		{"NATS connection", "", &jobs.NATSConfig{}},
		{"Model endpoint", "", &OpenAIConfig{}},
		{"Worker", envPrefix, &Config{}},
	} {
		fmt.Fprintf(tw, "%s:\t\t\n", p.title)
		if err := envconfig.Usagef(p.prefix, p.spec, tw, usageTemplate); err != nil {
			return err
		}
		fmt.Fprintln(tw, "\t\t")
	}
	return tw.Flush()
}
