package envvars

import (
	"slices"
	"strings"
	"text/template"

	"github.com/kelseyhightower/envconfig"

	"github.com/jetagent/jetagent/internal/textdist"
)

// keysTemplate prints the variables of an envconfig spec, one a line.
var keysTemplate = template.Must(template.New("keys").Parse("{{range .}}{{.Key}}\n{{end}}"))

// Keys lists the variables envconfig reads for spec under prefix ("" for
// none), as envconfig.Process would name them.
func Keys(prefix string, spec any) ([]string, error) {
	var sb strings.Builder
	if err := envconfig.Usaget(prefix, spec, &sb, keysTemplate); err != nil {
		return nil, err
	}
	return strings.Fields(sb.String()), nil
}

// Stray is a variable of the environment that no program reads.
type Stray struct {
	// Name is the variable as set.
	Name string
	// Suggest is the known variable it is most likely a typo of ("" when
	// none is close).
	Suggest string
}

// Strays returns the variables of environ (os.Environ's "NAME=value"
// form) whose names begin with prefix, in any case, and are not in known,
// sorted by name (names are case-sensitive: jetagent_concurrency, from a
// .env file written in lower case, was ignored without a word). A stray is matched to the closest known variable when that is at
// most one edit per five letters of the known name after the prefix away
// (at least one: the prefix is shared, so it does not count), or differs
// only in case or underscores (JETAGENT_MCPCONFIG).
func Strays(environ []string, prefix string, known []string) []Stray {
	var out []Stray
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if len(name) < len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) || slices.Contains(known, name) {
			continue
		}
		out = append(out, Stray{Name: name, Suggest: closest(name, prefix, known)})
	}
	slices.SortFunc(out, func(a, b Stray) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func closest(name, prefix string, known []string) string {
	fold := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "_", "")) }
	best, bestD := "", -1
	for _, k := range known {
		if fold(k) == fold(name) {
			return k
		}
		d := textdist.Distance(name, k)
		if d <= max(1, len(strings.TrimPrefix(k, prefix))/5) && (bestD < 0 || d < bestD) {
			best, bestD = k, d
		}
	}
	return best
}

// Neighbours are variables that other programs read from an environment
// jetagent's binaries share with them: openai-go's client and the nats
// CLI (its --help). They are no typos of OPENAI_API_KEY or NATS_KEY.
func Neighbours() []string {
	return []string{
		"OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_WEBHOOK_SECRET",
		"NATS_COLOR", "NATS_CONTEXT", "NATS_JWT", "NATS_NKEY", "NATS_SEED", "NATS_SOCKS_PROXY", "NATS_TIMEOUT",
	}
}
