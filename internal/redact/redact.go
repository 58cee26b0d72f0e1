package redact

import (
	"net/url"
	"slices"
	"strings"
)

// Mask stands for what was taken out.
const Mask = "xxxxx"

// URL is raw with its credentials replaced: its userinfo (user:xxxxx@ for
// a password, xxxxx@ for a bare user part, often a token), each host
// label and path segment that looks like a key (see SecretSegment), as in
// https://host/v1/xxxxx/chat or https://xxxxx.tunnel.example/mcp, and
// the value of each query or fragment parameter named like a credential
// (see CredentialParam) or looking like a key, as in
// https://host/mcp?api_key=xxxxx or https://app/cb#access_token=xxxxx.
// Anything else is returned as it is, byte for byte. It works on the
// text, so a URL that does not parse is redacted as well (a password
// holding an unescaped '/', '?' or '#' too). It takes time linear in
// len(raw).
func URL(raw string) string {
	u := split(raw)
	var b strings.Builder
	b.Grow(len(raw))
	b.WriteString(u.scheme)
	switch {
	case u.hasPass:
		b.WriteString(u.user + ":" + Mask + "@")
	case u.hasUser:
		b.WriteString(Mask + "@")
	}
	b.WriteString(maskHost(u.host))
	b.WriteString(maskPath(u.path))
	if u.hasQuery {
		b.WriteString("?" + maskParams(u.query))
	}
	if u.hasFrag {
		b.WriteString("#" + maskParams(u.frag))
	}
	return b.String()
}

// parts is a URL cut up on its text: scheme + "//", userinfo, host (with
// its port), path, query and fragment (without their '?' and '#').
type parts struct {
	scheme           string
	user, pass       string
	hasUser, hasPass bool
	host, path       string
	query, frag      string
	hasQuery         bool
	hasFrag          bool
}

// split cuts raw into its parts. Without "://" raw is taken for
// host/path (or userinfo@host/path), or a bare path when it starts with
// '/'. The authority ends at the first '/', '?' or '#', except when what
// precedes that byte is user:pass with a password that is no port and an
// '@' follows: a hand-written password holding a '/', '?' or '#'
// (https://user:p#ss@host) is a password still, not a path or fragment
// to show.
func split(raw string) parts {
	var u parts
	rest := raw
	if i := strings.Index(raw, "://"); i >= 0 {
		u.scheme, rest = raw[:i+3], raw[i+3:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 && end < len(rest) && !strings.HasPrefix(rest, "[") {
		if _, port, ok := strings.Cut(rest[:end], ":"); ok && port != "" && !allDigits(port) {
			if a := strings.IndexByte(rest[end:], '@'); a >= 0 {
				at = end + a
				if e := strings.IndexAny(rest[at:], "/?#"); e >= 0 {
					end = at + e
				} else {
					end = len(rest)
				}
			}
		}
	}
	if at >= 0 {
		u.hasUser = true
		u.user, u.pass, u.hasPass = strings.Cut(rest[:at], ":")
	}
	u.host, rest = rest[at+1:end], rest[end:]
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		u.frag, u.hasFrag, rest = rest[i+1:], true, rest[:i]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		u.query, u.hasQuery, rest = rest[i+1:], true, rest[:i]
	}
	u.path = rest
	return u
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// hostLabels are the labels of host (a name, not an IP literal), without
// its port.
func hostLabels(host string) []string {
	if strings.HasPrefix(host, "[") { // an IPv6 literal
		return nil
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.Split(host, ".")
}

// maskHost masks the labels of host that look like keys (SecretSegment):
// a tunnel's or relay's https://<token>.example.io.
func maskHost(host string) string {
	labels := hostLabels(host)
	changed := false
	for i, l := range labels {
		if SecretSegment(l) {
			labels[i] = Mask
			changed = true
		}
	}
	if !changed {
		return host
	}
	port := ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		port = host[i:]
	}
	return strings.Join(labels, ".") + port
}

// param is one name=value of a query or fragment, as written; eq is false
// for a bare value (a fragment's #sk-...).
type param struct {
	name, value string
	eq          bool
}

// forParams calls f with each parameter of q (separated by '&' or ';') and
// the separator after it (0 at the end).
func forParams(q string, f func(p param, sep byte)) {
	for {
		i := strings.IndexAny(q, "&;")
		piece, sep := q, byte(0)
		if i >= 0 {
			piece, sep, q = q[:i], q[i], q[i+1:]
		}
		name, value, eq := strings.Cut(piece, "=")
		if !eq {
			name, value = "", piece
		}
		f(param{name, value, eq}, sep)
		if i < 0 {
			return
		}
	}
}

// secretParam says whether p's value is a credential: it is named for
// one (CredentialParam), or looks like one (SecretSegment).
func secretParam(p param) bool {
	if p.value == "" {
		return false
	}
	name := p.name
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	if p.eq && CredentialParam(name) {
		return true
	}
	v := p.value
	if d, err := url.QueryUnescape(v); err == nil {
		v = d
	}
	return SecretSegment(v)
}

// maskParams masks the values of q's credential parameters, on the text
// (the rest is left byte for byte).
func maskParams(q string) string {
	var b strings.Builder
	changed := false
	forParams(q, func(p param, sep byte) {
		if p.eq {
			b.WriteString(p.name + "=")
		}
		if secretParam(p) {
			b.WriteString(Mask)
			changed = true
		} else {
			b.WriteString(p.value)
		}
		if sep != 0 {
			b.WriteByte(sep)
		}
	})
	if !changed {
		return q
	}
	return b.String()
}

// credentialWords are the words of query parameter names that carry
// credentials (api_key, access_token, X-Amz-Signature, sig, ...) and the
// usual names run together (apikey, accesstoken).
var credentialWords = []string{
	"key", "token", "secret", "password", "passwd", "pwd", "pass", "auth", "authorization",
	"sig", "signature", "credential", "credentials", "session", "jwt", "bearer",
	"apikey", "accesskey", "secretkey", "privatekey", "accesstoken", "authtoken", "clientsecret", "sessionid",
}

// credentialSuffixes end run-together names of credentials (HubSpot's
// hapikey, mytoken, appsecret, a servlet's jsessionid).
var credentialSuffixes = []string{"apikey", "token", "secret", "password", "passwd", "sessionid"}

// CredentialParam says whether a query parameter of that name carries a
// credential: the name, or one of its words (split at '_', '-', '.', '[',
// ']', ' ' and lower-to-upper case changes), in any case, is one of key,
// token, secret, password, passwd, pwd, pass, auth, authorization, sig,
// signature, credential(s), session, jwt, bearer, or apikey, accesskey,
// secretkey, privatekey, accesstoken, authtoken, clientsecret, sessionid,
// or ends in apikey, token, secret, password, passwd or sessionid
// (hapikey, jsessionid).
func CredentialParam(name string) bool {
	for _, word := range words(name) {
		if slices.Contains(credentialWords, word) {
			return true
		}
		for _, s := range credentialSuffixes {
			if strings.HasSuffix(word, s) {
				return true
			}
		}
	}
	return false
}

// words splits a name at '_', '-', '.', '[', ']', ' ' and lower-to-upper
// case changes, in lower case.
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
		case c == '_' || c == '-' || c == '.' || c == '[' || c == ']' || c == ' ':
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

// Secrets lists the credentials raw carries, for Text: what URL masks
// (its userinfo's password, or its bare user part, its host labels and
// path segments that look like keys, the values of its credential query
// and fragment parameters), each as written and percent-decoded. Values
// shorter than 4 bytes are left out (masking them would garble unrelated
// text).
func Secrets(raw string) []string {
	var out []string
	seen := map[string]bool{}
	add1 := func(s string) {
		if len(s) >= 4 && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	add := func(s string) {
		add1(s)
		if d, err := url.QueryUnescape(s); err == nil && d != s {
			add1(d)
		}
	}
	u := split(raw)
	switch {
	case u.hasPass:
		add(u.pass)
	case u.hasUser:
		add(u.user)
	}
	for _, l := range hostLabels(u.host) {
		if SecretSegment(l) {
			add(l)
		}
	}
	for _, seg := range pathSecrets(u.path) {
		add(seg)
	}
	for _, q := range []string{u.query, u.frag} {
		forParams(q, func(p param, _ byte) {
			if secretParam(p) {
				add(p.value)
			}
		})
	}
	return out
}

// Text is s with every occurrence of each of secrets replaced by Mask:
// for text that quotes a URL Secrets was taken from (a transport's error
// names the URL it failed to reach), however it quotes it. Where
// occurrences overlap or touch (one secret the other's prefix), the
// whole stretch they cover is one Mask, so no part of either is shown.
// It takes time linear in len(s) for each secret.
func Text(s string, secrets []string) string {
	covered := cover(s, secrets)
	if covered == nil {
		return s
	}
	return writeMasked(s, covered)
}

// cover marks the bytes of s that some occurrence of one of secrets
// covers; nil when none occurs.
func cover(s string, secrets []string) []bool {
	var covered []bool
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		marked := 0 // covered[:marked] holds this secret's earlier matches
		for from := 0; from <= len(s)-len(sec); {
			i := strings.Index(s[from:], sec)
			if i < 0 {
				break
			}
			i += from
			if covered == nil {
				covered = make([]bool, len(s))
			}
			end := i + len(sec)
			for j := max(i, marked); j < end; j++ {
				covered[j] = true
			}
			marked = end
			from = i + 1 // matches may overlap ("aaaa" in "aaaaaa")
		}
	}
	return covered
}

// writeMasked is s with each run of covered bytes replaced by one Mask;
// the bytes between runs are copied a run at a time.
func writeMasked(s string, covered []bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && !covered[j] {
			j++
		}
		b.WriteString(s[i:j])
		if j == len(s) {
			break
		}
		b.WriteString(Mask)
		for j < len(s) && covered[j] {
			j++
		}
		i = j
	}
	return b.String()
}
