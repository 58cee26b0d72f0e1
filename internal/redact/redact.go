package redact

import "strings"

// Mask stands for what was taken out.
const Mask = "xxxxx"

// URL is raw with its userinfo replaced: user:xxxxx@ for a password,
// xxxxx@ for a bare user part (often a token). Anything else, a URL
// without userinfo included, is returned as it is.
func URL(raw string) string {
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
