package toolcache

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/jetagent/jetagent/internal/redact"
)

// What a server answers is masked too: a server can echo the secrets it
// was configured with (a stdio server's tool printing its environment,
// which holds the GITHUB_TOKEN its "env" gave it; an HTTP server echoing
// its Authorization header or its URL's ?api_key=), and its answers reach
// the model, the events anyone can watch and the stored transcripts.
// The pool masks the exact values it configured, in every form text
// quoting them takes (redact.Forms: JSON escapes, percent-encoding), in
// whatever leaves it from a server: tool results (text, structured
// content, embedded resources, error results), resource listings and
// reads, the tools' titles, descriptions and schemas, the notifications
// it passes on, and the name and version a server gives itself (Status).
// Tool names are left: a call needs them as the server wrote them.
//
// Which values: those configSecrets takes for errors (credentials by the
// name of their header, variable or flag, by their place, or by their
// look), but only where masking them cannot wreck ordinary output. A
// value is masked in answers when it is at least minConfigSecret (8)
// bytes long and, when only its look took it, looks like a key other
// than by being a UUID (a project or team id in "env" is an id the
// server's answers name) and is no path or URL; when its name took it,
// it is masked unless it reads as ordinary text (see ordinary: a path, a
// URL, a number, a few plain words). Shorter values (an env value "1", a 6-byte URL password)
// are masked in errors and logs (4 bytes and up) but not in answers.
// Encodings a server shows in practice are added: the base64 of
// user:password that the pool sends as Basic authorization for a URL's
// userinfo, the password inside a configured "Basic <base64>" header,
// each value of a configured Cookie header. A whole value that is only a
// scheme or names around secrets masked on their own ("Bearer <v>",
// "sid=<v>") is left to them, so the answer reads "Bearer xxxxx".

// answerSecrets are the values the pool masks in servers' answers, with
// their Forms.
func answerSecrets(servers map[string]ServerConfig) []string {
	var kept []string
	keep := func(v string) {
		if !slices.Contains(kept, v) {
			kept = append(kept, v)
		}
	}
	for _, name := range sortedKeys(servers) {
		sc := servers[name]
		named := append(redact.Secrets(sc.URL), sc.pathSecrets...)
		for _, v := range named {
			if shownCredential(v, true) {
				keep(v)
			}
		}
		sc.eachCredential(func(v string, named bool) {
			if shownCredential(v, named) {
				keep(v)
			}
		})
		for _, v := range sc.encodedSecrets() {
			keep(v)
		}
	}
	var out []string
	for _, v := range kept {
		if coveredByOthers(v, kept) {
			continue
		}
		for _, f := range redact.Forms(v) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// errorSecrets are what urlSecrets takes out of errors and logs, with the
// encodings of answerSecrets and the Forms of each.
func errorSecrets(servers map[string]ServerConfig) []string {
	vals := urlSecrets(servers)
	for _, name := range sortedKeys(servers) {
		vals = append(vals, servers[name].encodedSecrets()...)
	}
	var out []string
	for _, v := range vals {
		for _, f := range redact.Forms(v) {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// shownCredential says whether v, a credential of a server's config
// (named: by its name or place; else by its look), is masked in answers.
func shownCredential(v string, named bool) bool {
	switch {
	case len(v) < minConfigSecret:
		return false
	case named:
		return !ordinary(v)
	}
	return redact.SecretSegment(v) && !uuidLike(v) && !pathOrURL(v)
}

// pathOrURL says whether v is a path (/..., ./..., ../..., ~/...) or a URL
// (...://...), with no blank: answers name paths and URLs (a directory a
// server was given, whose name a test or a user made of words and
// digits), and a URL's credentials are taken by redact.Secrets.
func pathOrURL(v string) bool {
	if strings.ContainsAny(v, " \t\n") {
		return false
	}
	for _, p := range []string{"/", "./", "../", "~/"} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return strings.Contains(v, "://")
}

// ordinary says whether v, a value named like a credential, reads as
// text that tool output holds for reasons of its own, so that masking it
// would garble answers: a path (a TOKEN_FILE, --key-file), a URL (an
// AUTH_URL; its own credentials are taken by redact.Secrets), a number,
// date, time or version, or plain words under 20 bytes (letters only,
// each word lower case, upper case or capitalised, between '-', '_', '.'
// or ' ': an AUTH_MODE of "oauth-device", a SESSION_STORE of "memory").
// Other than a path or a URL, a value that looks like a key
// (redact.SecretSegment) is never ordinary.
func ordinary(v string) bool {
	if pathOrURL(v) {
		return true
	}
	if redact.SecretSegment(v) {
		return false
	}
	digits, numeric := 0, true
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
			digits++
		case strings.IndexByte(".,:-+/ ", c) < 0:
			numeric = false
		}
	}
	if numeric && digits < 16 {
		return true
	}
	if len(v) >= 20 {
		return false
	}
	for _, w := range strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune("-_. ", r) }) {
		if !plainWord(w) {
			return false
		}
	}
	return true
}

// plainWord says whether w is letters only, all lower case, all upper
// case, or capitalised.
func plainWord(w string) bool {
	upper := 0
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c >= 'A' && c <= 'Z':
			upper++
		case c >= 'a' && c <= 'z':
		default:
			return false
		}
	}
	return upper == 0 || upper == len(w) || (upper == 1 && w[0] >= 'A' && w[0] <= 'Z')
}

// uuidLike says whether v is a UUID (8-4-4-4-12 hex digits).
func uuidLike(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
			continue
		}
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// coveredByOthers says whether v is masked well enough by the other
// values of kept: with them masked in it, what is left of v is a scheme,
// names and separators ("Bearer xxxxx", "sid=xxxxx; theme=xxxxx"), so
// masking v whole would only hide those.
func coveredByOthers(v string, kept []string) bool {
	var others []string
	for _, o := range kept {
		if o != v && len(o) < len(v) {
			others = append(others, o)
		}
	}
	m := redact.Text(v, others)
	if m == v {
		return false
	}
	for _, w := range strings.FieldsFunc(strings.ReplaceAll(m, redact.Mask, " "), func(r rune) bool { return strings.ContainsRune(" ;,=:", r) }) {
		if !plainWord(w) || len(w) >= 20 {
			return false
		}
	}
	return true
}

// encodedSecrets are the encodings of sc's credentials its server sees
// and may echo: the base64 of user:password (or of token: for a bare
// user part) that splitUserinfo sends as Basic authorization; the
// password (or user:password) decoded from a configured "Basic <base64>"
// header; the values of a configured Cookie header.
func (sc ServerConfig) encodedSecrets() []string {
	var out []string
	if u, err := url.Parse(sc.URL); err == nil && u.User != nil {
		pass, _ := u.User.Password()
		out = append(out, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass)))
	}
	for _, k := range sortedKeys(sc.Headers) {
		v := strings.TrimSpace(sc.Headers[k])
		switch {
		case strings.EqualFold(k, "Cookie"):
			for _, c := range strings.Split(v, ";") {
				if _, val, ok := strings.Cut(strings.TrimSpace(c), "="); ok && shownCredential(val, true) {
					out = append(out, val)
				}
			}
		case redact.CredentialParam(k):
			scheme, cred, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Basic") {
				continue
			}
			dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
			if err != nil {
				continue
			}
			user, pass, _ := strings.Cut(string(dec), ":")
			switch {
			case shownCredential(pass, true):
				out = append(out, pass)
			case shownCredential(user, true): // a token as the user part
				out = append(out, user)
			}
		}
	}
	return out
}

// maskResult masks the pool's answer secrets in a tool's result.
func (p *Pool) maskResult(r Result) Result {
	if len(p.shown) == 0 {
		return r
	}
	asJSON := len(r.Structured) > 0 && r.Text == string(r.Structured) // no text: flattenResult's
	r.Text = redact.TextAcross(r.Text, r.joins, p.shown)
	if len(r.Structured) > 0 {
		r.Structured = redact.JSON(r.Structured, p.shown)
	}
	if asJSON { // masked as JSON: its strings are decoded where need be
		r.Text = string(r.Structured)
	}
	return r
}

// maskText masks the pool's answer secrets in s.
func (p *Pool) maskText(s string) string { return redact.Text(s, p.shown) }

// maskTools masks the answer secrets in what servers say of their tools
// (titles, descriptions, schemas), in place: they are sent to the model
// in every request and published in the events. Names are left: a call
// needs them as the server wrote them.
func (p *Pool) maskTools(tools []Tool) {
	if len(p.shown) == 0 {
		return
	}
	for i := range tools {
		t := &tools[i]
		t.Title, t.Description = p.maskText(t.Title), p.maskText(t.Description)
		for _, raw := range []*json.RawMessage{&t.InputSchema, &t.Parameters, &t.OutputSchema} {
			if len(*raw) > 0 {
				*raw = redact.JSON(*raw, p.shown)
			}
		}
	}
}

// maskResource masks the answer secrets in a listed resource (a URI may
// carry a token: a read by the masked URI or name finds the real one).
func (p *Pool) maskResource(r Resource) Resource {
	r.URI, r.URITemplate = p.maskText(r.URI), p.maskText(r.URITemplate)
	r.Name, r.Description = p.maskText(r.Name), p.maskText(r.Description)
	return r
}

// maskNotification masks the answer secrets in a notification's
// parameters (a server's log message, a progress message), on a copy.
func (p *Pool) maskNotification(n mcp.JSONRPCNotification) mcp.JSONRPCNotification {
	if len(p.shown) == 0 {
		return n
	}
	if n.Params.Meta != nil {
		n.Params.Meta, _ = p.maskValue(n.Params.Meta).(map[string]any)
	}
	if n.Params.AdditionalFields != nil {
		n.Params.AdditionalFields, _ = p.maskValue(n.Params.AdditionalFields).(map[string]any)
	}
	return n
}

// maskValue is v, a decoded JSON value, with the answer secrets masked
// in its strings and keys; maps and slices are copied.
func (p *Pool) maskValue(v any) any {
	switch v := v.(type) {
	case string:
		return p.maskText(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		var masked []string // keys that masking changes
		for k, e := range v {
			if mk := p.maskText(k); mk != k {
				masked = append(masked, k)
				continue
			}
			out[k] = p.maskValue(e)
		}
		// Two keys masked alike ("xxxxx"), or like a key of the server's,
		// keep their values under distinct names, as redact.JSON's.
		slices.Sort(masked)
		for _, k := range masked {
			mk := p.maskText(k)
			for n := 2; ; n++ {
				if _, taken := out[mk]; !taken {
					break
				}
				mk = fmt.Sprintf("%s#%d", p.maskText(k), n)
			}
			out[mk] = p.maskValue(v[k])
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = p.maskValue(e)
		}
		return out
	}
	return v
}
