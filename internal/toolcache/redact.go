package toolcache

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/jetagent/jetagent/internal/redact"
)

// splitUserinfo takes the userinfo out of an http(s) server's URL and
// sends it as the Basic authorization net/http would have made of it
// (unless headers set Authorization, which net/http would then send
// instead). Left in the URL, it would be quoted by the transports' errors
// (net/http hides only a password), which reach the status, the log and
// the model.
func splitUserinfo(raw string, headers map[string]string) (string, map[string]string) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw, headers
	}
	pass, _ := u.User.Password()
	auth := u.User.Username() + ":" + pass
	u.User = nil
	out := make(map[string]string, len(headers)+1)
	has := false
	for k, v := range headers {
		out[k] = v
		has = has || strings.EqualFold(k, "Authorization")
	}
	if !has {
		out["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(auth))
	}
	return u.String(), out
}

// urlError is a transport constructor's error for raw, which quotes the
// URL whole when it does not parse: the cause, with raw redacted.
func urlError(raw string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: redact.URL(raw), Err: ue.Err}
	}
	return err
}

// urlSecrets are the credentials the servers' URLs carry (redact.Secrets:
// userinfo, credential query parameters such as ?api_key=), the
// values ${VAR} put into a URL after its host (ServerConfig.pathSecrets),
// and those of headers, env and args (ServerConfig.configSecrets). The
// transports quote a URL whole in their errors ('Post "https://host/mcp?
// api_key=...": dial tcp ...'), which reach the model, events,
// transcripts, the status and the log: the pool takes these out of
// every error it returns and every line it logs.
func urlSecrets(servers map[string]ServerConfig) []string {
	var out []string
	for _, sc := range servers {
		out = append(out, redact.Secrets(sc.URL)...)
		out = append(out, sc.pathSecrets...)
		out = append(out, sc.configSecrets()...) // headers, env, args
	}
	return out
}

// scrubbed is an error whose text had a server URL's credentials taken
// out; the cause is kept for errors.Is and errors.As.
type scrubbed struct {
	err error
	msg string
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// scrub takes the servers' URL credentials out of err's text.
func scrub(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	if out := redact.Text(msg, secrets); out != msg {
		return &scrubbed{err: err, msg: out}
	}
	return err
}

// scrubHandler takes the servers' URL credentials out of the message and
// the attributes of every record it passes on.
type scrubHandler struct {
	slog.Handler
	secrets []string
}

func (h scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, redact.Text(r.Message, h.secrets), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	scrubbedAttrs := make([]slog.Attr, len(as))
	for i, a := range as {
		scrubbedAttrs[i] = h.attr(a)
	}
	return scrubHandler{h.Handler.WithAttrs(scrubbedAttrs), h.secrets}
}

func (h scrubHandler) WithGroup(name string) slog.Handler {
	return scrubHandler{h.Handler.WithGroup(name), h.secrets}
}

func (h scrubHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact.Text(v.String(), h.secrets))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = h.attr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.Any(a.Key, scrub(err, h.secrets))
		}
		s := fmt.Sprint(v.Any())
		if out := redact.Text(s, h.secrets); out != s {
			return slog.String(a.Key, out)
		}
	}
	return a
}
