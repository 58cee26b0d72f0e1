package llm

import "strings"

// RedactURL is raw with its userinfo replaced, for logs and errors:
// user:xxxxx@ for a password, xxxxx@ for a bare user part (often a token).
// A base URL such as https://user:key@proxy/v1 authenticates to a proxy.
// It works on the text, so a URL that does not parse is redacted as well.
func RedactURL(raw string) string {
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
	shown := "xxxxx@"
	if user, _, hasPass := strings.Cut(authority[:at], ":"); hasPass {
		shown = user + ":xxxxx@"
	}
	return scheme + shown + rest[at+1:]
}
