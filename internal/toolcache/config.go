package toolcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/redact"
	"github.com/jetagent/jetagent/internal/textdist"
)

// Transport types of a server.
const (
	TypeStdio     = "stdio"
	TypeHTTP      = "http"
	TypeSSE       = "sse"
	TypeInProcess = "inprocess" // only through WithInProcessServer, never from a file
)

// Session modes of a server.
const (
	// SessionShared multiplexes every job's calls on one long-lived session.
	SessionShared = "shared"
	// SessionPerJob gives each job (View) its own session, opened on first use
	// and closed with the View: for stateful servers such as browsers.
	SessionPerJob = "per-job"
)

// DefaultMaxConcurrent bounds the calls in flight on one session when a
// server's config does not say.
const DefaultMaxConcurrent = 32

// Config is the operator's MCP server configuration, in the format Claude
// Desktop, Cursor ({"mcpServers": {...}}) and VS Code ({"servers": {...}})
// already use. Jobs refer to servers by name only.
//
// Besides the usual keys, each server may set "callTimeout", "maxConcurrent",
// "sessionMode", "allow", "deny", "disabled" and the protocol it is spoken
// to with (see ServerConfig):
//
//	"protocol": "2026-07-28"
//
// asks for the sessionless protocol 2026-07-28 (no initialize handshake, no
// HTTP session: server/discover, then every request stands alone), which some
// gateways now require. The server must speak it: there is no fallback to
// the handshake. Only for stdio and http servers (sse is the 2024-11-05
// transport). Without it the pool uses the initialize handshake at
// "protocolVersion" (default 2025-11-25), which every current server answers.
type Config struct {
	Servers map[string]ServerConfig
}

// ServerConfig is one configured server. Command, Args, Env and Cwd describe a
// stdio server; URL, Headers and Type ("http" or "sse") a remote one.
type ServerConfig struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Type is "stdio", "http" or "sse"; inferred from Command/URL when empty.
	Type string `json:"type,omitempty"`
	// CallTimeout bounds one tools/call (0: only the caller's context).
	CallTimeout Duration `json:"callTimeout,omitempty"`
	// MaxConcurrent bounds calls in flight on one session (0: DefaultMaxConcurrent).
	MaxConcurrent int `json:"maxConcurrent,omitempty"`
	// SessionMode is "shared" (default) or "per-job".
	SessionMode string `json:"sessionMode,omitempty"`
	// Allow and Deny are globs (path.Match syntax) over the server's own tool
	// names: a tool is listed when it matches some Allow glob (or Allow is
	// empty) and no Deny glob.
	Allow    []string `json:"allow,omitempty"`
	Deny     []string `json:"deny,omitempty"`
	Disabled bool     `json:"disabled,omitempty"`
	// ToolHints override the hints the server gives its tools, by glob
	// over the server's own tool names: {"get_*": {"readOnlyHint": true},
	// "send_mail": {"idempotentHint": false}}. A field set here replaces
	// the server's; globs apply in name order, exact names last. The
	// journal resends a call interrupted by a crash only when its tool is
	// read-only or idempotent, so this is how an operator vouches for (or
	// against) a server that gives no hints or wrong ones.
	ToolHints map[string]Annotations `json:"toolHints,omitempty"`
	// ProtocolVersion pins the MCP protocol version offered in initialize.
	// Empty means the newest version that uses the initialize handshake
	// (2025-11-25), which every current server answers at once; see doc.go.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Protocol "2026-07-28" (ProtocolSessionless) selects the sessionless
	// protocol instead of the initialize handshake; the server must speak it.
	// Not with ProtocolVersion, and not for sse servers. Empty: the handshake.
	Protocol string `json:"protocol,omitempty"`

	// pathSecrets are the values ${VAR} put into URL after its host (see
	// urlPathValues), taken out of errors and logs as URL credentials are.
	pathSecrets []string
}

// ProtocolSessionless is the value of ServerConfig.Protocol that selects the
// sessionless protocol (no initialize handshake, no session).
const ProtocolSessionless = "2026-07-28"

// Duration is a time.Duration that reads from JSON as a Go duration string
// ("30s", "2m") or a number of seconds.
type Duration time.Duration

// durationError is a Duration that did not read.
type durationError struct{ msg string }

func (e *durationError) Error() string { return e.msg }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return &durationError{fmt.Sprintf("invalid duration %q (want e.g. \"30s\")", s)}
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return &durationError{fmt.Sprintf("invalid duration %s (want a string like \"30s\" or seconds)", b)}
	}
	// Beyond ±292 years the conversion to nanoseconds overflows (to a
	// negative duration, whatever the sign); below a nanosecond it
	// rounds to 0, no timeout at all.
	ns := secs * float64(time.Second)
	if math.Abs(ns) >= math.MaxInt64 {
		return &durationError{fmt.Sprintf("invalid duration %s seconds (at most %d, about 292 years)", b, int64(math.MaxInt64/int64(time.Second)))}
	}
	if ns != 0 && math.Abs(ns) < 1 {
		return &durationError{fmt.Sprintf("invalid duration %s seconds (below a nanosecond, which would be no timeout)", b)}
	}
	*d = Duration(ns)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// MaxConfigSize bounds a servers file: one larger is not a servers file
// (a log or a device named by mistake), and reading it whole would take
// the memory it takes.
const MaxConfigSize = 16 << 20

// LoadConfig reads and parses a configuration file, expanding ${VAR} from
// the process environment.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("toolcache: read config: %w", err)
	}
	defer f.Close() //nolint:errcheck // read only
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("toolcache: read config: %w", err)
	}
	if len(data) > MaxConfigSize {
		return Config{}, fmt.Errorf("toolcache: read config: %s is over %d MiB: not an MCP servers file", path, MaxConfigSize>>20)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses a configuration, expanding ${VAR} (and VS Code's
// ${env:VAR}) from the process environment.
func ParseConfig(data []byte) (Config, error) {
	return ParseConfigWithEnv(data, os.LookupEnv)
}

// serverSections are the keys of the servers file that hold servers.
var serverSections = []string{"mcpServers", "servers"}

// ParseConfigWithEnv is ParseConfig with an explicit environment lookup.
//
// What JSON leaves unsaid is refused, not guessed: a key given twice in
// one object (encoding/json keeps the last, silently), a file that is not
// UTF-8 (its bytes would become U+FFFD in a command or path). A UTF-8 byte
// order mark is skipped. An error about a value names its path of keys
// (mcpServers.github.env.PORT) and its line and column; a syntax error's
// are added by cfgerr.InJSONFile, which knows the file.
func ParseConfigWithEnv(data []byte, lookup func(string) (string, bool)) (Config, error) {
	if err := checkEncoding(data); err != nil {
		return Config{}, err
	}
	doc := newJSONDoc(data)
	data = doc.data
	if len(bytes.TrimSpace(data)) == 0 {
		return Config{}, errors.New(`toolcache: config is empty: want {"mcpServers": {"name": {"command": ...}}}`)
	}
	var raw struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Servers    map[string]json.RawMessage `json:"servers"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			at := ""
			if _, start, ok := doc.valueAt(nil, te.Offset); ok {
				at = " (at " + doc.position(start) + ")"
			}
			if te.Field == "" {
				return Config{}, fmt.Errorf(`toolcache: the MCP servers file must be a JSON object, {"mcpServers": {...}} (or VS Code's {"servers": {...}}): got %s%s`, jsonValue(te.Value), at)
			}
			return Config{}, fmt.Errorf(`toolcache: %q must be an object of servers by name ({"name": {"command": ...}}): got %s%s`, te.Field, jsonValue(te.Value), at)
		}
		if hint := syntaxHint(data, err); hint != "" {
			return Config{}, fmt.Errorf("toolcache: config is not valid JSON (%s): %w", hint, err)
		}
		return Config{}, fmt.Errorf("toolcache: config is not valid JSON: %w", err)
	}
	// encoding/json keeps the last of two equal keys: a server defined
	// twice (two files pasted together) would run the second, silently.
	if err := doc.walk(func(jsonPath, int, int) bool { return true }); err != nil {
		return Config{}, err
	}
	if err := nullSections(doc); err != nil {
		return Config{}, err
	}
	if raw.MCPServers == nil && raw.Servers == nil {
		return Config{}, noSections(data)
	}
	cfg := Config{Servers: map[string]ServerConfig{}}
	for i, m := range []map[string]json.RawMessage{raw.MCPServers, raw.Servers} {
		section := sectionKey(data, serverSections[i])
		for _, name := range sortedKeys(m) {
			if _, dup := cfg.Servers[name]; dup {
				return Config{}, fmt.Errorf(`toolcache: server %q: defined in both "mcpServers" and "servers"`, name)
			}
			entry := jsonPath{section, name}
			if string(m[name]) == "null" {
				return Config{}, fmt.Errorf(`toolcache: %s: must be an object ({"command": ...} or {"url": ...}): got null (at %s)`, entry, doc.position(doc.spanOf(entry)))
			}
			if err := nearMissKeys(m[name]); err != nil {
				return Config{}, fmt.Errorf("toolcache: server %q: %w", name, err)
			}
			dec := json.NewDecoder(bytes.NewReader(m[name]))
			var sc ServerConfig
			if err := dec.Decode(&sc); err != nil {
				return Config{}, doc.entryError(entry, err)
			}
			if err := sc.expand(lookup); err != nil {
				return Config{}, fmt.Errorf("toolcache: server %q: %w", name, err)
			}
			cfg.Servers[name] = sc
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// checkEncoding refuses a file that is not UTF-8: UTF-16 (Windows
// PowerShell's "> mcp.json" writes it), or bytes of another encoding
// (Latin-1), which encoding/json would turn into U+FFFD inside a string,
// silently changing a command, a path or a key.
func checkEncoding(data []byte) error {
	if bytes.HasPrefix(data, []byte{0xFF, 0xFE}) || bytes.HasPrefix(data, []byte{0xFE, 0xFF}) ||
		len(data) >= 2 && (data[0] == 0) != (data[1] == 0) {
		return errors.New(`toolcache: config is UTF-16 (Windows PowerShell writes it with ">"): save it as UTF-8`)
	}
	if utf8.Valid(data) {
		return nil
	}
	i := 0
	for i < len(data) {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		i += n
	}
	return fmt.Errorf("toolcache: config is not UTF-8: byte 0x%02X at %s starts no UTF-8 character (saved as Latin-1 or Windows-1252?): save it as UTF-8", data[i], newJSONDoc(data).position(i))
}

// syntaxHint says in plain words what a syntax error at a comment, a
// trailing comma or a single quote is, or "".
func syntaxHint(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) || se.Offset < 1 || se.Offset > int64(len(data)) {
		return ""
	}
	at := int(se.Offset) - 1
	switch c := data[at]; {
	case c == '/' && at+1 < len(data) && (data[at+1] == '/' || data[at+1] == '*'):
		return "a comment: JSON has none (VS Code's editor takes them in its mcp.json; this reader does not): remove it"
	case c == '}' || c == ']':
		if prev := bytes.TrimRight(data[:at], " \t\r\n"); len(prev) > 0 && prev[len(prev)-1] == ',' {
			return "a comma after the last entry: JSON has none there: remove it"
		}
	case c == '\'':
		return "JSON strings take double quotes"
	}
	return ""
}

// sectionKey is the key of data's top-level object that encoding/json
// read as want ("mcpServers" also from "MCPServers"): errors name the
// key as written.
func sectionKey(data []byte, want string) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) == nil {
		for k := range top {
			if strings.EqualFold(k, want) {
				return k
			}
		}
	}
	return want
}

// nullSections refuses "mcpServers": null, which encoding/json reads as
// no servers at all.
func nullSections(doc jsonDoc) error {
	var top map[string]json.RawMessage
	if json.Unmarshal(doc.data, &top) != nil {
		return nil
	}
	for _, k := range sortedKeys(top) {
		for _, want := range serverSections {
			if strings.EqualFold(k, want) && string(top[k]) == "null" {
				return fmt.Errorf(`toolcache: %q is null: want an object of servers by name ({"name": {"command": ...}}) (at %s)`, k, doc.position(doc.spanOf(jsonPath{k})))
			}
		}
	}
	return nil
}

// noSections is the error for a file with neither "mcpServers" nor
// "servers", naming the keys it has (another client's "context_servers").
func noSections(data []byte) error {
	var top map[string]json.RawMessage
	_ = json.Unmarshal(data, &top)
	if len(top) == 0 {
		return errors.New(`toolcache: config has neither "mcpServers" nor "servers"`)
	}
	keys := sortedKeys(top)
	if len(keys) > 5 {
		keys = append(keys[:5], "...")
	}
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = quoteKey(k)
	}
	return fmt.Errorf(`toolcache: config has neither "mcpServers" nor "servers" (its keys: %s)`, strings.Join(quoted, ", "))
}

// checkServerNames refuses an empty server name, and two names that differ
// only in case ("Files" and "files"): jobs, tool prefixes, metrics and logs
// tell servers apart by name, and such a pair is a mistake (two clients'
// files merged), not two servers meant to be told apart by a capital.
func checkServerNames(names []string) error {
	folded := map[string]string{}
	for _, name := range names {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("toolcache: server %q: a server needs a name (jobs choose servers by name)", name)
		}
		if strings.TrimSpace(name) != name || strings.IndexFunc(name, unicode.IsControl) >= 0 {
			return fmt.Errorf("toolcache: server %q: a name with blanks around it or a control character (jobs choose servers by name)", name)
		}
		k := strings.ToLower(name)
		if other, ok := folded[k]; ok {
			return fmt.Errorf("toolcache: servers %q and %q: names that differ only in case; rename or remove one", other, name)
		}
		folded[k] = name
	}
	return nil
}

// Validate checks every server and fills in inferred values (Type). Errors
// name the server and the field.
func (c *Config) Validate() error {
	if err := checkServerNames(sortedKeys(c.Servers)); err != nil {
		return err
	}
	for _, name := range sortedKeys(c.Servers) {
		sc := c.Servers[name]
		if err := sc.validate(); err != nil {
			return fmt.Errorf("toolcache: server %q: %w", name, err)
		}
		c.Servers[name] = sc
	}
	return nil
}

func (sc *ServerConfig) validate() error {
	typ := strings.ToLower(strings.TrimSpace(sc.Type))
	switch typ {
	case "streamable-http", "streamablehttp", "streamable_http", "http":
		typ = TypeHTTP
	case "", TypeStdio, TypeSSE, TypeInProcess:
	default:
		return fmt.Errorf("type: unknown transport %q (want stdio, http or sse)", sc.Type)
	}
	switch {
	case sc.Command != "" && sc.URL != "":
		return fmt.Errorf("command and url: give one, not both")
	case typ == TypeInProcess:
	case sc.Command == "" && sc.URL == "":
		return fmt.Errorf("command or url: one is required")
	case sc.Command != "":
		if typ != "" && typ != TypeStdio {
			return fmt.Errorf("type: %q does not go with command (stdio)", sc.Type)
		}
		if err := checkCommand(sc.Command); err != nil {
			return err
		}
		typ = TypeStdio
	default:
		if typ == TypeStdio {
			return fmt.Errorf("type: stdio needs command, not url")
		}
		if typ == "" {
			typ = TypeHTTP
		}
		if strings.TrimSpace(sc.URL) != sc.URL {
			return fmt.Errorf("url: %q has blanks around it", redact.URL(sc.URL))
		}
		if !strings.HasPrefix(sc.URL, "http://") && !strings.HasPrefix(sc.URL, "https://") {
			return fmt.Errorf("url: %q is not an http(s) URL", redact.URL(sc.URL)) // expanded: may hold a secret
		}
		u, err := url.Parse(sc.URL)
		if err != nil && len(redact.Secrets(sc.URL)) > 0 {
			// Its reason may quote part of a credential: of
			// https://user:p#ss@host, 'invalid port ":p" after host'.
			return fmt.Errorf("url: %q does not parse (a '#', '/', '?' or '@' in a password or token must be written %%23, %%2F, %%3F, %%40)", redact.URL(sc.URL))
		}
		if err != nil {
			return fmt.Errorf("url: %w", urlError(sc.URL, err)) // url.Parse's own error quotes it whole
		}
		if u.Host == "" {
			return fmt.Errorf("url: %q has no host", redact.URL(sc.URL))
		}
	}
	if typ == TypeStdio && (len(sc.Headers) > 0) {
		return fmt.Errorf("headers: only for http and sse servers")
	}
	if typ != TypeStdio && (len(sc.Args) > 0 || len(sc.Env) > 0 || sc.Cwd != "") {
		return fmt.Errorf("args, env, cwd: only for stdio servers")
	}
	if err := checkEnvAndHeaders(sc.Env, sc.Headers); err != nil {
		return err
	}
	sc.Type = typ
	switch { // in any case, as type is
	case sc.SessionMode == "", strings.EqualFold(sc.SessionMode, SessionShared):
		sc.SessionMode = SessionShared
	case strings.EqualFold(sc.SessionMode, SessionPerJob):
		sc.SessionMode = SessionPerJob
	default:
		return fmt.Errorf("sessionMode: %q (want %q or %q)", sc.SessionMode, SessionShared, SessionPerJob)
	}
	if sc.MaxConcurrent < 0 {
		return fmt.Errorf("maxConcurrent: %d is negative", sc.MaxConcurrent)
	}
	if sc.CallTimeout < 0 {
		return fmt.Errorf("callTimeout: %s is negative", time.Duration(sc.CallTimeout))
	}
	if err := checkGlobs("allow", sc.Allow); err != nil {
		return err
	}
	if err := checkGlobs("deny", sc.Deny); err != nil {
		return err
	}
	for _, g := range sortedKeys(sc.ToolHints) { // of several bad globs, the same one each run
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("toolHints: bad glob %q: %w", g, err)
		}
	}
	if sc.ProtocolVersion != "" && !legacyProtocol(sc.ProtocolVersion) {
		hint := ""
		if modernProtocol(sc.ProtocolVersion) {
			hint = fmt.Sprintf("; for the sessionless protocol set \"protocol\": %q", sc.ProtocolVersion)
		}
		return fmt.Errorf("protocolVersion: %q is not a version with the initialize handshake (e.g. 2025-06-18, 2025-11-25)%s", sc.ProtocolVersion, hint)
	}
	switch {
	case sc.Protocol == "":
	case !modernProtocol(sc.Protocol):
		return fmt.Errorf("protocol: %q (want %q, or leave it out for the initialize handshake)", sc.Protocol, ProtocolSessionless)
	case sc.ProtocolVersion != "":
		return fmt.Errorf("protocol and protocolVersion: give one, not both (protocolVersion pins the initialize handshake, which protocol %s does not have)", sc.Protocol)
	case typ == TypeSSE:
		return fmt.Errorf("protocol: %s is not spoken over sse (the 2024-11-05 transport); use type http", sc.Protocol)
	}
	return nil
}

// nonASCII is the index of s's first byte that is not ASCII, or -1.
func nonASCII(s string) int {
	return strings.IndexFunc(s, func(r rune) bool { return r >= utf8.RuneSelf })
}

// quoteKey quotes a key an error says is unknown or misplaced with its
// non-ASCII characters escaped ("m\u0441pServers"): a Cyrillic letter in
// a Latin name looks the same quoted as it is.
func quoteKey(k string) string {
	if nonASCII(k) < 0 {
		return strconv.Quote(k)
	}
	return strconv.QuoteToASCII(k)
}

// checkCommand refuses a command no process can start: blank, or a
// whole command line ("npx -y server", which exec looks for as one file
// name) when its first word is a program and the whole is not. Its other
// words are not quoted: they may hold a key.
func checkCommand(command string) error {
	words := strings.Fields(command)
	switch {
	case len(words) == 0:
		return errors.New("command: blank")
	case len(words) == 1 || strings.Contains(words[0], "/"):
		return nil
	}
	if _, err := exec.LookPath(command); err == nil {
		return nil
	}
	if _, err := exec.LookPath(words[0]); err != nil {
		return nil // the start says what is missing
	}
	return fmt.Errorf("command: %q and %d more words: a command is one program, not run by a shell; put its arguments in args (\"command\": %q, \"args\": [...])", words[0], len(words)-1, words[0])
}

// checkEnvAndHeaders refuses what would fail every start or request of
// the server, or change its meaning, instead of at the first one (and at
// every reconnection after it): a variable name with "=" ("A=B": "x" sets
// A to "B=x") or NUL, a NUL in a value (exec refuses it), a header name
// that is no HTTP token, a header value with a line break or NUL (a
// secret read from a file with its newline; net/http refuses it). Values
// are never quoted: they may be secrets.
func checkEnvAndHeaders(env, headers map[string]string) error {
	for _, k := range sortedKeys(env) {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return fmt.Errorf("env: %q is not a variable name (no \"=\", no NUL, not empty)", k)
		case nonASCII(k) >= 0:
			r, _ := utf8.DecodeRuneInString(k[nonASCII(k):])
			return fmt.Errorf("env: %s holds %U, not ASCII (a look-alike of a Latin letter?): a shell cannot set it, nor a server expect it", quoteKey(k), r)
		case strings.ContainsRune(env[k], 0):
			return fmt.Errorf("env.%s: the value holds a NUL byte, which no process environment can carry", k)
		}
	}
	for _, k := range sortedKeys(headers) {
		if !validHeaderName(k) {
			return fmt.Errorf("headers: %q is not an HTTP header name", k)
		}
		if i := strings.IndexAny(headers[k], "\r\n\x00"); i >= 0 {
			return fmt.Errorf("headers.%s: the value holds a line break or NUL at byte %d of %d (a variable read from a file with its newline?); HTTP refuses it", k, i, len(headers[k]))
		}
	}
	return nil
}

// validHeaderName reports whether k is an HTTP token (RFC 9110 5.1).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func checkGlobs(field string, globs []string) error {
	for i, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("%s[%d]: bad glob %q: %w", field, i, g, err)
		}
	}
	return nil
}

// varRef matches ${VAR} and VS Code's ${env:VAR}.
var varRef = regexp.MustCompile(`\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)\}`)

// editorRef matches VS Code's ${input:id} (a prompt), ${config:key} and
// ${command:id}, which no environment answers: left as they are, they
// would reach the server as text (a header "Bearer ${input:token}").
var editorRef = regexp.MustCompile(`\$\{(input|config|command):[^}]*\}`)

// editorVars are VS Code's predefined variables, which ${NAME} would look
// for in the environment.
var editorVars = []string{"workspaceFolder", "workspaceFolderBasename", "workspaceRoot", "userHome", "cwd", "file", "fileDirname", "pathSeparator"}

// urlPathValues are the values of the variables raw (a URL before
// expansion) names after its host, in its path, query or fragment: a key
// in the path ("https://actions.example.com/mcp/${API_KEY}/sse", as some
// hosted servers are reached) is a credential the transports quote whole
// in their errors, and redact.Secrets, which knows userinfo and credential
// query parameters only, cannot tell it. A variable in the scheme or host
// ("${MCP_BASE}/mcp") is an address, and stays readable.
func urlPathValues(raw string, lookup func(string) (string, bool)) []string {
	var out []string
	for _, loc := range varRef.FindAllStringSubmatchIndex(raw, -1) {
		before := raw[:loc[0]]
		if _, rest, ok := strings.Cut(before, "://"); ok {
			before = rest
		}
		if !strings.ContainsAny(before, "/?#") {
			continue
		}
		if v, ok := lookup(raw[loc[4]:loc[5]]); ok && len(v) >= 4 && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// expand replaces ${VAR} in every string field; an unset variable is an
// error naming the field, so a missing secret fails at startup, not at the
// first call.
func (sc *ServerConfig) expand(lookup func(string) (string, bool)) error {
	var firstErr error
	ex := func(field, s string) string {
		if m := editorRef.FindString(s); m != "" && firstErr == nil {
			firstErr = fmt.Errorf("%s: %s is VS Code's, which asks or looks it up: this reader knows only environment variables, ${NAME} or ${env:NAME}", field, m)
		}
		return varRef.ReplaceAllStringFunc(s, func(m string) string {
			name := varRef.FindStringSubmatch(m)[2]
			v, ok := lookup(name)
			if !ok && firstErr == nil {
				hint := ""
				if slices.Contains(editorVars, name) {
					hint = " (" + m + " is a VS Code variable: this reader knows only environment variables)"
				}
				firstErr = fmt.Errorf("%s: environment variable %s is not set%s", field, name, hint)
			}
			return v
		})
	}
	sc.Command = ex("command", sc.Command)
	for i := range sc.Args {
		sc.Args[i] = ex("args["+strconv.Itoa(i)+"]", sc.Args[i])
	}
	for _, k := range sortedKeys(sc.Env) {
		sc.Env[k] = ex("env."+k, sc.Env[k])
	}
	sc.Cwd = ex("cwd", sc.Cwd)
	sc.pathSecrets = urlPathValues(sc.URL, lookup)
	sc.URL = ex("url", sc.URL)
	for _, k := range sortedKeys(sc.Headers) {
		sc.Headers[k] = ex("headers."+k, sc.Headers[k])
	}
	return firstErr
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// maxConcurrent is the effective per-session call limit.
func (sc ServerConfig) maxConcurrent() int {
	if sc.MaxConcurrent > 0 {
		return sc.MaxConcurrent
	}
	return DefaultMaxConcurrent
}

// toolAllowed applies the server's allow/deny globs to a tool's own name.
func (sc ServerConfig) toolAllowed(original string) bool {
	return globsAllow(sc.Allow, sc.Deny, original)
}

// hints returns a tool's hints after the server config's ToolHints.
func (sc ServerConfig) hints(original string, a Annotations) Annotations {
	if len(sc.ToolHints) == 0 {
		return a
	}
	globs := make([]string, 0, len(sc.ToolHints))
	for g := range sc.ToolHints {
		globs = append(globs, g)
	}
	// Exact names last, so they win over any glob; otherwise name order.
	sort.Slice(globs, func(i, j int) bool {
		ei, ej := !strings.ContainsAny(globs[i], `*?[\`), !strings.ContainsAny(globs[j], `*?[\`)
		if ei != ej {
			return ej
		}
		return globs[i] < globs[j]
	})
	for _, g := range globs {
		if ok, _ := path.Match(g, original); !ok {
			continue
		}
		o := sc.ToolHints[g]
		for _, f := range []struct{ dst, src **bool }{
			{&a.ReadOnlyHint, &o.ReadOnlyHint}, {&a.DestructiveHint, &o.DestructiveHint},
			{&a.IdempotentHint, &o.IdempotentHint}, {&a.OpenWorldHint, &o.OpenWorldHint},
		} {
			if *f.src != nil {
				*f.dst = *f.src
			}
		}
	}
	return a
}

// GlobsAllow reports whether name passes a job's allow and deny globs
// (path.Match syntax): it matches an allow glob (or allow is empty) and no
// deny glob. Views apply it to server tools; a job's client tools pass the
// same test.
func GlobsAllow(allow, deny []string, name string) bool { return globsAllow(allow, deny, name) }

// CheckGlobs reports the first bad glob (path.Match syntax) of a job's
// allow or deny list, as a view refuses it; field names the list.
func CheckGlobs(field string, globs []string) error { return checkGlobs(field, globs) }

// globsAllow reports whether any of names matches an allow glob (or allow is
// empty) and none matches a deny glob.
func globsAllow(allow, deny []string, names ...string) bool {
	match := func(globs []string) bool {
		for _, g := range globs {
			for _, n := range names {
				if ok, _ := path.Match(g, n); ok {
					return true
				}
			}
		}
		return false
	}
	if len(allow) > 0 && !match(allow) {
		return false
	}
	return !match(deny)
}

// serverKeys are the keys of a server's entry that ServerConfig reads.
var serverKeys = func() []string {
	var keys []string
	t := reflect.TypeFor[ServerConfig]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}()

// nearMissKeys refuses a key of a server's entry that is not one of ours
// but nearly is ("sessionMod", "calltimeout"): ignored, it would silently
// leave the setting at its default. Other unknown keys are other clients'
// settings (Cline's "autoApprove", "timeout", ...) and are ignored, so one
// file can serve several clients.
func nearMissKeys(entry json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(entry, &m) != nil {
		return nil // the decoder says what is wrong
	}
	for _, k := range sortedKeys(m) {
		if slices.Contains(serverKeys, k) {
			continue
		}
		// Short keys get one edit, long ones two: "enabled" (another
		// client's) is two from "disabled" and must pass.
		near := 0
		switch {
		case len(k) >= 8:
			near = 2
		case len(k) >= 5:
			near = 1
		}
		for _, known := range serverKeys {
			if len(k) > len(known)+near || len(known) > len(k)+near {
				continue // farther than near by length alone (and a long key costs its length squared)
			}
			if strings.EqualFold(k, known) || textdist.Distance(strings.ToLower(k), strings.ToLower(known)) <= near {
				return fmt.Errorf("unknown key %s: did you mean %q?", quoteKey(k), known)
			}
		}
	}
	return nil
}

// entryError is err, a server entry's decoding error, in the file's
// words: encoding/json names Go types ("cannot unmarshal string into Go
// struct field ServerConfig.args of type []string"), which an operator
// editing the file does not know, and leaves map keys out of its Field
// ("env", not "env.PORT"). The value at fault is named by its path of
// keys from the top of the file (mcpServers.x.env.PORT) and its line and
// column; never quoted, as it may be a secret.
func (d jsonDoc) entryError(entry jsonPath, err error) error {
	name := entry[len(entry)-1]
	var de *durationError
	if errors.As(err, &de) {
		path := append(slices.Clone(entry), "callTimeout") // the one Duration
		return fmt.Errorf("toolcache: %s: %s (at %s)", path, de.msg, d.position(d.spanOf(path)))
	}
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return fmt.Errorf("toolcache: server %q: %w", name, err)
	}
	got := jsonValue(te.Value)
	path, start, ok := d.valueAt(entry, te.Offset)
	if !ok { // not found: say it as the Field has it
		return fmt.Errorf("toolcache: server %q: %s: must be %s: got %s", name, te.Field, jsonKind(te.Type), got)
	}
	at := " (at " + d.position(start) + ")"
	if len(path) == len(entry) {
		return fmt.Errorf(`toolcache: %s: must be an object ({"command": ...} or {"url": ...}): got %s%s`, path, got, at)
	}
	hint := ""
	if k := te.Type.Kind(); k == reflect.String && (te.Value == "number" || te.Value == "bool") {
		hint = " (put it in double quotes)"
	}
	return fmt.Errorf("toolcache: %s: must be %s: got %s%s%s", path, jsonKind(te.Type), got, hint, at)
}

// jsonKind says what JSON value t reads from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + jsonPlural(t.Elem())
	case reflect.Map:
		return "an object of " + jsonPlural(t.Elem())
	}
	return "an object"
}

func jsonPlural(t reflect.Type) string {
	switch k := jsonKind(t); {
	case k == "a string":
		return "strings"
	case k == "a whole number":
		return "whole numbers"
	case strings.HasPrefix(k, "an object"):
		return "objects"
	default:
		return "values"
	}
}

// jsonValue names a JSON value as encoding/json's UnmarshalTypeError.Value
// gives it ("array", "number", "number 1.5").
func jsonValue(v string) string {
	switch {
	case v == "array", v == "object":
		return "an " + v
	case v == "bool":
		return "a boolean"
	case v == "number", v == "string":
		return "a " + v
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	}
	return v
}

// minConfigSecret is the shortest value configSecrets takes: every
// occurrence of one is masked in errors and logs, and a short value
// ("true", "1234") would garble them.
const minConfigSecret = 8

// configSecrets are the credentials sc hands its server outside its URL,
// for scrub: a server may quote them back (a stdio server's stderr,
// "invalid token ghp_...", is part of its errors; so is a CLI's "unknown
// option --api-key=..."). They are the values of headers, env variables
// and "--flag=value" or "--flag value" arguments named like credentials
// (redact.CredentialParam: Authorization, X-Api-Key, GITHUB_TOKEN,
// --password; Cookie), with a header's value also without its scheme
// ("Bearer x": x), values that look like keys (redact.SecretSegment), and
// the credentials of URLs given as arguments (redact.Secrets); each at
// least minConfigSecret bytes long. The words of a command after the
// first count as arguments.
func (sc ServerConfig) configSecrets() []string {
	var out []string
	sc.eachCredential(func(v string, _ bool) {
		if len(v) >= minConfigSecret && !slices.Contains(out, v) {
			out = append(out, v)
		}
	})
	return out
}

// eachCredential calls f with each value configSecrets takes, in the
// config's order (perhaps more than once): named is true for a value
// taken by its name or its place (a credential header, variable or flag,
// a header's value after its scheme, a URL's credentials), false for one
// taken by its look alone.
func (sc ServerConfig) eachCredential(f func(v string, named bool)) {
	byLook := func(v string) {
		if redact.SecretSegment(v) {
			f(v, false)
		}
		if strings.Contains(v, "://") {
			for _, s := range redact.Secrets(v) {
				f(s, true)
			}
		}
	}
	for _, k := range sortedKeys(sc.Headers) {
		v := sc.Headers[k]
		if redact.CredentialParam(k) || strings.EqualFold(k, "Cookie") {
			f(v, true)
			if _, cred, ok := strings.Cut(v, " "); ok {
				f(strings.TrimSpace(cred), true)
			}
		}
		byLook(v)
	}
	for _, k := range sortedKeys(sc.Env) {
		if redact.CredentialParam(k) {
			f(sc.Env[k], true)
		}
		byLook(sc.Env[k])
	}
	// A whole command line in "command" ("npx srv --api-key sk-..."),
	// which the error of its failed start quotes, counts as arguments.
	args := sc.Args
	if words := strings.Fields(sc.Command); len(words) > 1 {
		args = append(words[1:], sc.Args...)
	}
	for i, a := range args {
		flag, isFlag := strings.CutPrefix(a, "-")
		flag = strings.TrimPrefix(flag, "-")
		name, value, hasValue := strings.Cut(flag, "=")
		switch {
		case isFlag && hasValue && redact.CredentialParam(name):
			f(value, true)
		case isFlag && !hasValue && redact.CredentialParam(name) && i+1 < len(args):
			f(args[i+1], true)
		}
		if isFlag && hasValue {
			byLook(value)
		}
		byLook(a)
	}
}
