package toolcache

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// maxNameLen is OpenAI's limit on function names.
const maxNameLen = 64

// validName is OpenAI's function-name rule, which every Tool.Name satisfies.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName reports whether s can be offered to a model as a function name.
func ValidName(s string) bool { return validName.MatchString(s) }

// qualifySep joins server and tool in a server-qualified name.
const qualifySep = "__"

// sanitizeName maps any string to the function-name alphabet, keeping
// what it can of its meaning, the same way every time:
//   - letters with accents lose them, ligatures and compatibility forms
//     are spelled out (NFKD; "Café" is Cafe, "ﬁle" is file), and a few
//     Latin letters with no decomposition are transliterated (ß ss, æ ae,
//     ø o, ł l, ...);
//   - runs of other ASCII characters (spaces, punctuation) become one '_';
//   - a name with other non-ASCII characters (CJK, Cyrillic, emoji: no
//     ASCII form here) keeps its ASCII part and ends in '_' and a hash of
//     the whole name ("tool_" and the hash when nothing is left), so that
//     such names stay distinct: "查询天气" and "获取时间" were both "_".
func sanitizeName(s string) string {
	var b strings.Builder
	under, lost := false, false
	write := func(r rune) {
		ok := r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		switch {
		case ok:
			b.WriteRune(r)
			under = false
		case r >= utf8.RuneSelf && unicode.Is(unicode.Mn, r):
			// a combining accent, left by the decomposition: dropped
		default:
			if r >= utf8.RuneSelf {
				lost = true
			}
			if !under {
				b.WriteByte('_')
				under = true
			}
		}
	}
	for _, r := range s {
		if r < utf8.RuneSelf {
			write(r)
			continue
		}
		if t, ok := latinTranslit[r]; ok {
			for _, c := range t {
				write(c)
			}
			continue
		}
		for _, c := range norm.NFKD.String(string(r)) {
			if t, ok := latinTranslit[c]; ok {
				for _, c2 := range t {
					write(c2)
				}
				continue
			}
			write(c)
		}
	}
	name := b.String()
	if lost {
		name = strings.Trim(name, "_-")
		if name == "" {
			name = "tool"
		}
		return name + "_" + shortHash(s)
	}
	if name == "" {
		return "_"
	}
	return name
}

// latinTranslit spells Latin letters that NFKD leaves as they are.
var latinTranslit = map[rune]string{
	'ß': "ss", 'ẞ': "SS", 'æ': "ae", 'Æ': "AE", 'œ': "oe", 'Œ': "OE",
	'ø': "o", 'Ø': "O", 'đ': "d", 'Đ': "D", 'ð': "d", 'Ð': "D",
	'ł': "l", 'Ł': "L", 'þ': "th", 'Þ': "Th", 'ı': "i", 'ħ': "h", 'Ħ': "H",
	'ŧ': "t", 'Ŧ': "T", 'ŋ': "ng", 'Ŋ': "NG", 'ĸ': "k",
}

// fitName makes s at most 64 characters; a shortened name ends in a hash of
// key so that two long names with a common prefix stay distinct.
func fitName(s, key string) string {
	if len(s) <= maxNameLen {
		return s
	}
	return s[:maxNameLen-9] + "_" + shortHash(key)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// assignNames gives every tool its model-facing Name, predictably and
// independently of the order servers connected in:
//   - a tool whose (sanitised) name is unique across servers keeps it;
//   - when two or more servers offer the same name, each of those tools is
//     server-qualified as server__tool (not first-come-wins);
//   - names are made to fit the 64-character rule, and any remaining
//     collision (two originals that sanitise alike) gets a hash suffix of
//     server and original name.
//
// The mapping is reversible through the registry: Tool.Server and
// Tool.Original say where a Name goes.
func assignNames(tools []Tool) {
	base := make([]string, len(tools))
	servers := map[string]map[string]bool{}
	for i, t := range tools {
		base[i] = sanitizeName(t.Original)
		if servers[base[i]] == nil {
			servers[base[i]] = map[string]bool{}
		}
		servers[base[i]][t.Server] = true
	}
	for i := range tools {
		t := &tools[i]
		name := base[i]
		if len(servers[name]) > 1 {
			name = sanitizeName(t.Server) + qualifySep + name
		}
		t.Name = fitName(name, t.Server+"\x00"+t.Original)
	}
	// Residual collisions: deterministic order, then suffix all but none.
	idx := make([]int, len(tools))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ta, tb := tools[idx[a]], tools[idx[b]]
		if ta.Name != tb.Name {
			return ta.Name < tb.Name
		}
		if ta.Server != tb.Server {
			return ta.Server < tb.Server
		}
		return ta.Original < tb.Original
	})
	count := map[string]int{}
	for _, t := range tools {
		count[t.Name]++
	}
	for _, i := range idx {
		t := &tools[i]
		if count[t.Name] > 1 {
			key := t.Server + "\x00" + t.Original
			n := t.Name
			if len(n) > maxNameLen-9 {
				n = n[:maxNameLen-9]
			}
			t.Name = n + "_" + shortHash(key)
		}
	}
}
