package redact

import (
	"net/url"
	"strings"
)

// maskPath masks path's segments that look like credentials
// (SecretSegment), whole, and the values of a segment's credential
// parameters (a servlet's /app;jsessionid=..., /x;token=...), leaving the
// rest byte for byte.
func maskPath(path string) string {
	if path == "" {
		return path
	}
	segs := strings.Split(path, "/")
	changed := false
	for i, s := range segs {
		switch {
		case SecretSegment(s):
			segs[i] = Mask
			changed = true
		case strings.IndexByte(s, ';') >= 0:
			head, params, _ := strings.Cut(s, ";")
			if m := maskParams(params); m != params {
				segs[i] = head + ";" + m
				changed = true
			}
		}
	}
	if !changed {
		return path
	}
	return strings.Join(segs, "/")
}

// pathSecrets are what maskPath masks in path.
func pathSecrets(path string) []string {
	var out []string
	if path == "" {
		return out
	}
	for _, s := range strings.Split(path, "/") {
		if SecretSegment(s) {
			out = append(out, s)
			continue
		}
		if _, params, ok := strings.Cut(s, ";"); ok {
			forParams(params, func(p param, _ byte) {
				if secretParam(p) {
					out = append(out, p.value)
				}
			})
		}
	}
	return out
}

// secretPrefixes start the API keys and tokens of well-known services:
// OpenAI and Anthropic (sk-), Stripe (sk_, rk_), GitHub (ghp_, gho_, ghu_,
// ghs_, ghr_, github_pat_), GitLab (glpat-), Slack (xox?-, xapp-),
// Hugging Face (hf_), npm (npm_), Google (AIza), AWS (AKIA, ASIA), a JWT
// (eyJ, the base64 of `{"`).
var secretPrefixes = []string{
	"sk-", "sk_", "rk_", "pk_live_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
	"glpat-", "xoxa-", "xoxb-", "xoxe-", "xoxp-", "xoxr-", "xoxs-", "xapp-",
	"hf_", "npm_", "AIza", "AKIA", "ASIA", "eyJ",
}

// SecretSegment says whether a URL path segment looks like a credential,
// as when a key is put in the path (https://proxy/v1/sk-..., an MCP
// server's https://host/<token>/sse): it starts with a known key prefix
// (sk-, ghp_, xoxb-, AIza, eyJ, ...) followed by at least 8 characters
// one of which is a digit; or it is "Bearer" and a value (after a space or a '+'); or a UUID; or,
// percent-decoded, it holds a run of at least 20 characters of [A-Za-z0-9]
// (between '-', '_', '.', '~', ':', '+', '=') that mixes letters and
// digits as random text does (at least 5 changes between lower case,
// upper case and digits, one every 4 characters or more often). Path
// words and model names (v1, chat, completions, gpt-4o-mini-2024-07-18,
// claude-3-5-sonnet-20241022) are not.
func SecretSegment(seg string) bool {
	if d, err := url.PathUnescape(seg); err == nil {
		seg = d
	}
	if len(seg) < 8 {
		return false
	}
	for _, p := range secretPrefixes {
		if rest, ok := strings.CutPrefix(seg, p); ok && len(rest) >= 8 && strings.ContainsAny(rest, "0123456789") {
			return true
		}
	}
	if len(seg) > 7 && strings.EqualFold(seg[:6], "bearer") && strings.ContainsAny(seg[6:7], " +") {
		return true
	}
	if isUUID(seg) {
		return true
	}
	for _, run := range strings.FieldsFunc(seg, func(r rune) bool { return !isAlnum(r) }) {
		if randomLooking(run) {
			return true
		}
	}
	for _, run := range strings.FieldsFunc(seg, func(r rune) bool { return !isAlnum(r) && r != '-' && r != '_' }) {
		if randomPieces(run) {
			return true
		}
	}
	return false
}

// randomPieces says whether a base64url run, split by '-' and '_' into
// pieces shorter than randomLooking needs, reads as random as a whole:
// at least 20 letters and digits, mixing both, changing class at least 5
// times and once every 4 characters or more often within its pieces. A
// change from a piece's capital to its lower case does not count, nor do
// changes between pieces, so names made of words, numbers and short
// mixes (Mixtral-8x7B-Instruct-v0, sentence-transformers_all-MiniLM-L6-v2,
// llama-v3p1-405b-instruct) stay readable.
func randomPieces(run string) bool {
	if !strings.ContainsAny(run, "-_") {
		return false // randomLooking has judged it
	}
	n, changes := 0, 0
	var seen [3]bool
	for _, piece := range strings.FieldsFunc(run, func(r rune) bool { return r == '-' || r == '_' }) {
		n += len(piece)
		for i := 0; i < len(piece); i++ {
			seen[charClass(piece[i])] = true
			if i > 0 && charClass(piece[i]) != charClass(piece[i-1]) && (i > 1 || charClass(piece[0]) != 2 || charClass(piece[1]) != 1) {
				changes++
			}
		}
	}
	if n < 20 || !seen[0] || (!seen[1] && !seen[2]) {
		return false
	}
	return changes >= 5 && changes*4 >= n
}

// charClass is 0 for a digit, 1 for a lower case letter, 2 otherwise
// (upper case).
func charClass(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return 0
	case c >= 'a' && c <= 'z':
		return 1
	default:
		return 2
	}
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) {
				return false
			}
		}
	}
	return true
}

// randomLooking says whether an alphanumeric run reads as random: long,
// with letters and digits, changing class often (random base62 changes
// about every other character; words and version numbers seldom do).
func randomLooking(run string) bool {
	if len(run) < 20 {
		return false
	}
	class := charClass
	var seen [3]bool
	changes := 0
	for i := 0; i < len(run); i++ {
		seen[class(run[i])] = true
		if i > 0 && class(run[i]) != class(run[i-1]) {
			changes++
		}
	}
	if !seen[0] || (!seen[1] && !seen[2]) {
		return false
	}
	return changes >= 5 && changes*4 >= len(run)
}
