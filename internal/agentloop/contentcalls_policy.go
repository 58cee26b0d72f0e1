package agentloop

import (
	"strings"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/cfgerr"
)

// ContentCallMode says whether tool calls written into a reply's content
// are read (see the package documentation, "Calls in the content").
type ContentCallMode string

// Content-call modes.
const (
	// ContentCallsAuto reads the content of a reply that carries no
	// tool_calls: the default, right for every model.
	ContentCallsAuto ContentCallMode = "auto"
	// ContentCallsOn also reads the content of a reply that does carry
	// tool_calls (a server whose parser takes some calls and leaves others
	// in the text), for models that rarely or never use tool_calls.
	ContentCallsOn ContentCallMode = "on"
	// ContentCallsOff never reads the content: for a model that always
	// calls through tool_calls, whose text is always the answer. There is
	// then no re-ask either.
	ContentCallsOff ContentCallMode = "off"
)

// Valid reports whether m is auto, on or off ("" is not valid).
func (m ContentCallMode) Valid() bool {
	switch m {
	case ContentCallsAuto, ContentCallsOn, ContentCallsOff:
		return true
	}
	return false
}

// ContentCalls is the content-call policy: a default and per-model
// overrides, the first whose glob matches the job's model winning.
type ContentCalls struct {
	// Default applies to models no override matches ("" means auto).
	Default ContentCallMode
	Models  []ModelContentCalls
}

// ModelContentCalls is one per-model override.
type ModelContentCalls struct {
	// Model is a glob over model names: * matches any run of characters
	// (slashes too: "Qwen/*", "*qwen*"), ? one character; case does not
	// matter.
	Model string
	Mode  ContentCallMode
}

// ParseContentCalls reads the worker's form of the policy: comma-separated
// entries, each "GLOB=MODE" (an override) or a bare "MODE" (the default),
// e.g. "auto,gpt-4*=off,*qwen*=on". It never fails: what it cannot read is
// kept as written, for Validate to name.
func ParseContentCalls(s string) ContentCalls {
	var c ContentCalls
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		glob, mode, ok := strings.Cut(part, "=")
		if !ok {
			c.Default = ContentCallMode(strings.ToLower(part))
			continue
		}
		c.Models = append(c.Models, ModelContentCalls{
			Model: strings.TrimSpace(glob),
			Mode:  ContentCallMode(strings.ToLower(strings.TrimSpace(mode))),
		})
	}
	return c
}

// WithDefaults returns c with an empty default set to auto.
func (c ContentCalls) WithDefaults() ContentCalls {
	if c.Default == "" {
		c.Default = ContentCallsAuto
	}
	return c
}

// validate checks the policy; errors name ContentCalls.Default or
// ContentCalls.Models.
func (c ContentCalls) validate() error {
	if !c.Default.Valid() {
		return cfgerr.Field(ErrConfig, "ContentCalls.Default", "",
			"default content-call mode %q is not auto, on or off", c.Default)
	}
	for _, m := range c.Models {
		if m.Model == "" {
			return cfgerr.Field(ErrConfig, "ContentCalls.Models", "",
				"an override has no model glob (want GLOB=auto|on|off)")
		}
		if !m.Mode.Valid() {
			return cfgerr.Field(ErrConfig, "ContentCalls.Models", "",
				"content-call mode %q of model %q is not auto, on or off", m.Mode, m.Model)
		}
	}
	return nil
}

// For returns the mode for model: the first matching override, else the
// default (auto when unset).
func (c ContentCalls) For(model string) ContentCallMode {
	for _, m := range c.Models {
		if globMatch(strings.ToLower(m.Model), strings.ToLower(model)) {
			return m.Mode
		}
	}
	if c.Default == "" {
		return ContentCallsAuto
	}
	return c.Default
}

// globMatch matches name against pattern, where * is any run of
// characters and ? any one character.
func globMatch(pattern, name string) bool {
	px, nx := 0, 0
	starP, starN := -1, 0
	for nx < len(name) {
		if px < len(pattern) {
			switch pattern[px] {
			case '*':
				starP, starN = px, nx
				px++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[nx:])
				px, nx = px+1, nx+w
				continue
			default:
				if pattern[px] == name[nx] {
					px, nx = px+1, nx+1
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starN++
		px, nx = starP+1, starN
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}
