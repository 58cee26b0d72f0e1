package redact

import (
	"net/url"
	"slices"
	"strings"
)

// Mask stands for what was taken out.
const Mask = "xxxxx"

// URL is raw with its credentials replaced: its userinfo (user:xxxxx@ for
// a password, xxxxx@ for a bare user part, often a token), each path
// segment that looks like a key (see SecretSegment), as in
// https://host/v1/xxxxx/chat, and the value of each query parameter named
// like a credential (see CredentialParam), as in
// https://host/mcp?api_key=xxxxx. Anything else is returned as it is.
func URL(raw string) string {
	return maskQuery(maskPath(maskUserinfo(raw)))
}

func maskUserinfo(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	shown := Mask + "@"
	if user, _, hasPass := strings.Cut(authority[:at], ":"); hasPass {
		shown = user + ":" + Mask + "@"
	}
	return scheme + shown + rest[at+1:]
}

// maskQuery masks the values of raw's credential parameters, on the text
// (the rest of the query is left byte for byte).
func maskQuery(raw string) string {
	q := strings.IndexByte(raw, '?')
	if q < 0 {
		return raw
	}
	query, frag := raw[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	parts := strings.Split(query, "&")
	changed := false
	for i, p := range parts {
		name, value, ok := strings.Cut(p, "=")
		if !ok || value == "" {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if CredentialParam(name) {
			parts[i] = p[:len(p)-len(value)] + Mask
			changed = true
		}
	}
	if !changed {
		return raw
	}
	return raw[:q+1] + strings.Join(parts, "&") + frag
}

// credentialWords are the words of query parameter names that carry
// credentials (api_key, access_token, X-Amz-Signature, sig, ...) and the
// usual names run together (apikey, accesstoken).
var credentialWords = []string{
	"key", "token", "secret", "password", "passwd", "pwd", "auth", "sig", "signature",
	"credential", "credentials", "session", "jwt", "bearer",
	"apikey", "accesskey", "secretkey", "privatekey", "accesstoken", "authtoken", "clientsecret", "sessionid",
}

// CredentialParam says whether a query parameter of that name carries a
// credential: the name, or one of its words (split at '_', '-', '.' and
// lower-to-upper case changes), in any case, is one of key, token,
// secret, password, passwd, pwd, auth, sig, signature, credential(s),
// session, jwt, bearer, or apikey, accesskey, secretkey, privatekey,
// accesstoken, authtoken, clientsecret, sessionid.
func CredentialParam(name string) bool {
	for _, word := range words(name) {
		if slices.Contains(credentialWords, word) {
			return true
		}
	}
	return false
}

// words splits a name at '_', '-', '.' and lower-to-upper case changes,
// in lower case.
func words(name string) []string {
	var out []string
	start := 0
	flush := func(end int) {
		if end > start {
			out = append(out, strings.ToLower(name[start:end]))
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_' || c == '-' || c == '.':
			flush(i)
			start = i + 1
		case i > start && c >= 'A' && c <= 'Z' && name[i-1] >= 'a' && name[i-1] <= 'z':
			flush(i)
			start = i
		}
	}
	flush(len(name))
	return out
}

// Secrets lists the credentials raw carries, for Text: its userinfo's
// password, or its bare user part, its path segments that look like keys
// (SecretSegment) and the values of its credential query parameters,
// each as written and percent-decoded. Values shorter
// than 4 bytes are left out (masking them would garble unrelated text).
func Secrets(raw string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 4 && !slices.Contains(out, s) {
			out = append(out, s)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s && len(d) >= 4 && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	rest := raw
	if _, r, ok := strings.Cut(raw, "://"); ok {
		rest = r
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, pass, hasPass := strings.Cut(authority[:at], ":")
		if hasPass {
			add(pass)
		} else {
			add(user)
		}
	}
	for _, seg := range pathSecrets(raw) {
		add(seg)
	}
	if q := strings.IndexByte(raw, '?'); q >= 0 {
		query := raw[q+1:]
		if h := strings.IndexByte(query, '#'); h >= 0 {
			query = query[:h]
		}
		for _, p := range strings.Split(query, "&") {
			name, value, _ := strings.Cut(p, "=")
			if n, err := url.QueryUnescape(name); err == nil {
				name = n
			}
			if CredentialParam(name) {
				add(value)
			}
		}
	}
	return out
}

// Text is s with every occurrence of each of secrets replaced by Mask:
// for text that quotes a URL Secrets was taken from (a transport's error
// names the URL it failed to reach), however it quotes it.
func Text(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Mask)
		}
	}
	return s
}
