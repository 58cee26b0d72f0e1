package toolcache

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"sort"
	"strings"
)

// maxNameLen is OpenAI's limit on function names.
const maxNameLen = 64

// validName is OpenAI's function-name rule, which every Tool.Name satisfies.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName reports whether s can be offered to a model as a function name.
func ValidName(s string) bool { return validName.MatchString(s) }

// qualifySep joins server and tool in a server-qualified name.
const qualifySep = "__"

// sanitizeName maps any string to the function-name alphabet: runs of other
// characters become one '_'.
func sanitizeName(s string) string {
	var b strings.Builder
	under := false
	for _, r := range s {
		ok := r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if ok {
			b.WriteRune(r)
			under = false
			continue
		}
		if !under {
			b.WriteByte('_')
			under = true
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
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
