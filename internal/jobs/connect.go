package jobs

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/redact"
)

// NATSConfig is how to reach NATS. Its envconfig tags are the variables the
// nats CLI also reads, processed without a prefix; URL "" means "use the
// embedded server" to the worker and the local default to the submit CLI.
type NATSConfig struct {
	URL      string `envconfig:"NATS_URL" desc:"NATS server URL(s), comma-separated. Unset: the worker starts an embedded server; submit connects to nats://127.0.0.1:4222"`
	User     string `envconfig:"NATS_USER" desc:"NATS user name"`
	Password string `envconfig:"NATS_PASSWORD" desc:"NATS password"`
	Token    string `envconfig:"NATS_TOKEN" desc:"NATS authentication token"`
	Creds    string `envconfig:"NATS_CREDS" desc:"path of a NATS credentials (.creds) file"`
	CA       string `envconfig:"NATS_CA" desc:"path of a PEM CA certificate to verify the server (enables TLS)"`
	Cert     string `envconfig:"NATS_CERT" desc:"path of a PEM client certificate for mutual TLS (with NATS_KEY)"`
	Key      string `envconfig:"NATS_KEY" desc:"path of the PEM private key of NATS_CERT"`
}

// DefaultURL is where clients look when NATS_URL is unset: the embedded
// server's default listen address.
const DefaultURL = "nats://127.0.0.1:4222"

// Validate checks combinations that cannot work, naming the variables.
func (c NATSConfig) Validate() error {
	switch {
	case c.Token != "" && (c.User != "" || c.Password != ""):
		return fmt.Errorf("%w: NATS_TOKEN and NATS_USER/NATS_PASSWORD are exclusive", ErrConfig)
	case c.Password != "" && c.User == "":
		return fmt.Errorf("%w: NATS_PASSWORD is set but NATS_USER is not", ErrConfig)
	case (c.Cert == "") != (c.Key == ""):
		return fmt.Errorf("%w: NATS_CERT and NATS_KEY must be set together", ErrConfig)
	}
	return checkURLs(c.URL)
}

// checkURLs refuses NATS_URL values nats.go would take and never reach:
// it dials any scheme but tls, ws and wss as plain nats (htp://, a typo,
// connected; http:// pointed at a web server was retried for ever as
// unreachable), and a port out of range, or a list of commas alone, was
// retried as if the server were down.
func checkURLs(servers string) error {
	if servers == "" {
		return nil
	}
	n := 0
	for _, raw := range strings.Split(servers, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		n++
		shown := redact.URL(raw)
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw // as nats.go reads it
		}
		u, err := url.Parse(raw)
		if err != nil {
			continue // nats.go's own error names it (redacted), at once
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("%w: NATS_URL %q: scheme %q is not nats, tls, ws or wss", ErrConfig, shown, u.Scheme)
		}
		if p := u.Port(); p != "" {
			if port, err := strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
				return fmt.Errorf("%w: NATS_URL %q: port %s is not between 1 and 65535", ErrConfig, shown, p)
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("%w: NATS_URL %q holds no URL", ErrConfig, servers)
	}
	return nil
}

// checkFiles names the variable of a file that cannot be read: nats.go
// would report only "open /path: ...".
func (c NATSConfig) checkFiles() error {
	for _, f := range []struct{ variable, path string }{
		{"NATS_CREDS", c.Creds}, {"NATS_CA", c.CA}, {"NATS_CERT", c.Cert}, {"NATS_KEY", c.Key},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("%s=%s: %w", f.variable, f.path, err)
		}
		_ = fh.Close()
	}
	return nil
}

// Options turns the configuration into nats.go options; name labels the
// connection in the server's monitoring.
func (c NATSConfig) Options(name string) []nats.Option {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1), // a worker outlives NATS restarts
		nats.ReconnectWait(time.Second),
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.CA != "" {
		opts = append(opts, nats.RootCAs(c.CA))
	}
	if c.Cert != "" {
		opts = append(opts, nats.ClientCert(c.Cert, c.Key))
	}
	return opts
}

// Connect validates c and connects to c.URL (DefaultURL when empty).
func (c NATSConfig) Connect(name string, extra ...nats.Option) (*nats.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	url := c.URL
	if url == "" {
		url = DefaultURL
	}
	shown := redactURLs(url) // the error is printed (submit's stderr)
	if err := c.checkFiles(); err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", shown, err)
	}
	nc, err := nats.Connect(url, append(c.Options(name), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", shown, withoutCredentials(err, url))
	}
	return nc, nil
}
