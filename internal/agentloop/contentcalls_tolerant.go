package agentloop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	// kaptinlin/jsonrepair is a maintained Go port of josdejong's
	// jsonrepair, the lenient JSON reader most LLM tooling uses: it turns
	// single quotes, trailing commas, unquoted keys, Python's True/None
	// and comments into JSON. It also repairs what must stay an error
	// (unquoted string values, truncated documents), so lenientJSON lets
	// only the first kind through (see plausibleJSON). JSON5 readers for
	// Go were the alternative; none is still maintained.
	"github.com/kaptinlin/jsonrepair"
)

// The tolerant reader: near-miss calls that the shapes of contentcalls.go
// do not take, as small open models write them when their server has no
// tool parser. Each candidate must name a tool the job has (after
// stripping functions./default_api./to= prefixes) and carry its arguments
// as an object; the loop then validates them like any call, and drops
// those still invalid after the schema retry.
//
//	{{"name": ..., "arguments": {...}}}   doubled braces (template escaping)
//	"name": ..., "arguments": {...}       missing outer braces
//	{'name': ..., 'arguments': {...},}    Python dict, trailing commas
//	{"tool": ..., "tool_input": {...}}    other keys: tool_name, function,
//	                                      action/action_input, parameters, args, input
//	leton {...} </tool_call>              damaged or missing tags around any of these
//	[get_weather(city="Lima"), ...]       Python-style (Llama 3.2 pythonic, Gemma
//	print(default_api.f(x=1))             tool_code), keyword arguments only, the
//	                                      call standing on its own line
//	Action: NAME / Action Input: {...}    ReAct (a string input fills a tool's one
//	                                      string property)
//	NAME {...}                            a name, then its arguments: after a tag,
//	to=functions.NAME <|message|>{...}    Harmony (gpt-oss), DeepSeek's
//	<｜tool▁sep｜>NAME ```json {...}```    <｜tool▁sep｜>
//
// Anywhere in the content: inside <think> blocks, in fences of any
// language. Valid JSON that is not a call (an answer) is skipped whole.

// nearMiss is one call the tolerant reader took: a known tool, its
// arguments (a compact JSON object), the shape it was written in, and
// where it stands in the content.
type nearMiss struct {
	name, args, shape string
	start, end        int
}

// Shapes, as the content_call.recovered event names them.
const (
	shapeMarkup   = "markup"         // the strict shapes of contentcalls.go
	shapeJSON     = "json"           // a call object, repaired as needed
	shapeBraces   = "missing_braces" // "name": ..., "arguments": {...}
	shapeNamed    = "name_then_json" // NAME, then its arguments object
	shapePython   = "python"
	shapeReAct    = "react"
	maxNearMissIn = 256 << 10 // longer content is not read (quadratic scans)
)

var (
	nameKeys = []string{"name", "tool_name", "tool", "function_name", "function", "action", "recipient_name"}
	argKeys  = []string{"arguments", "parameters", "args", "input", "tool_input", "action_input", "params", "kwargs"}

	reReAct      = regexp.MustCompile(`(?mi)^[ \t]*Action[ \t]*:[ \t]*([^\n]*?)[ \t]*\r?\n[ \t]*Action[ \t]*Input[ \t]*:[ \t]*`)
	reReActEnd   = regexp.MustCompile(`(?mi)^[ \t]*(Observation|Thought|Action|Final Answer)[ \t]*:`)
	reNoBraces   = regexp.MustCompile(`["'](?:name|tool_name|tool)["']\s*:\s*["'][^"'\n]{1,128}["']\s*,\s*["'](?:arguments|parameters|args|input)["']\s*:\s*\{`)
	rePyCall     = regexp.MustCompile(`([A-Za-z_][\w.]*)[ \t]*\(`)
	reTag        = regexp.MustCompile(`<[^<>\n]{0,64}>`)
	rePyBefore   = regexp.MustCompile(`^(?:[\s\[(,]|Action\s*:|print\s*\(|tool_code\s*:?)*$`)
	rePyAfter    = regexp.MustCompile(`^[\s)\],;]*$`)
	reFenceTail  = regexp.MustCompile("```[^`\\n]*\\s*$")
	reFenceInput = regexp.MustCompile("(?s)^```[^`\\n]*\\n?(.*?)```$")
	reEmptyFence = regexp.MustCompile("```[^`\\n]*\\n?[\\s\\x00]*```")
	// reMarkup is call markup left around a taken call: tags (whole or
	// damaged), special tokens, the prefixes of Mistral and Firefunction.
	reMarkup  = regexp.MustCompile(`</?\s*tool_?calls?\s*>|<\s*tool_?calls?\b|\btool_?calls?\s*>|</?tools>|<\|[A-Za-z_/]+\|>|<｜[^｜\n]{0,40}｜>|\[TOOL_CALLS\]|</?function>|\bfunctools\b`)
	reOneWord = regexp.MustCompile(`^[A-Za-z_]{1,16}$`)
)

// readNearMiss returns the near-miss calls of content, in order, and the
// content without them and the markup around them. No calls: content as
// it was.
func readNearMiss(content string, lookup func(string) (json.RawMessage, bool)) ([]nearMiss, string) {
	if len(content) > maxNearMissIn || len(content) < 3 {
		return nil, content
	}
	r := &nearMissReader{s: content, lookup: lookup, blocked: make([]bool, len(content))}
	r.react()
	r.spans()
	r.noBraces()
	r.python()
	if len(r.out) == 0 {
		return nil, content
	}
	slices.SortFunc(r.out, func(a, b nearMiss) int { return a.start - b.start })
	return r.out, nearMissRest(content, r.out)
}

type nearMissReader struct {
	s       string
	lookup  func(string) (json.RawMessage, bool)
	blocked []bool // taken as a call, or JSON that is not one
	out     []nearMiss
}

func (r *nearMissReader) free(start, end int) bool {
	return !slices.Contains(r.blocked[start:end], true)
}

func (r *nearMissReader) block(start, end int) {
	for i := start; i < end; i++ {
		r.blocked[i] = true
	}
}

func (r *nearMissReader) take(name, args, shape string, start, end int) {
	r.out = append(r.out, nearMiss{name: name, args: args, shape: shape, start: start, end: end})
	r.block(start, end)
}

func (r *nearMissReader) resolve(raw string) (string, bool) { return resolveToolName(raw, r.lookup) }

// react takes "Action: NAME" / "Action Input: ..." pairs.
func (r *nearMissReader) react() {
	for _, m := range reReAct.FindAllStringSubmatchIndex(r.s, -1) {
		name, ok := r.resolve(r.s[m[2]:m[3]])
		if !ok || !r.free(m[0], m[1]) {
			continue
		}
		stop, end := len(r.s), len(r.s) // end of the input, of the span
		if e := reReActEnd.FindStringSubmatchIndex(r.s[m[1]:]); e != nil {
			stop = m[1] + e[0]
			if !strings.EqualFold(r.s[m[1]+e[2]:m[1]+e[3]], "observation") {
				end = stop
			} // else what follows is the model imagining the result: dropped
		}
		input := strings.TrimSpace(r.s[m[1]:stop])
		if f := reFenceInput.FindStringSubmatch(input); f != nil {
			input = strings.TrimSpace(f[1])
		}
		args, ok := r.reactArgs(name, input)
		if !ok {
			continue
		}
		r.take(name, args, shapeReAct, m[0], end)
	}
}

// reactArgs reads an Action Input: an object, else a plain string for a
// tool with one string property.
func (r *nearMissReader) reactArgs(name, input string) (string, bool) {
	if strings.HasPrefix(input, "{") {
		raw, ok := lenientJSON(input)
		if !ok || raw[0] != '{' {
			return "", false
		}
		return string(raw), true
	}
	schema, _ := r.lookup(name)
	prop := soleStringProperty(schema)
	if prop == "" || input == "" {
		return "", false
	}
	if u, err := strconv.Unquote(input); err == nil {
		input = u
	} else {
		input = strings.Trim(input, `'"`)
	}
	k, _ := json.Marshal(prop)
	v, _ := json.Marshal(input)
	return "{" + string(k) + ":" + string(v) + "}", true
}

// spans takes bracketed values that are calls, or arguments after a
// tool's name. Valid JSON that is neither is skipped whole (an answer).
func (r *nearMissReader) spans() {
	s := r.s
	for i := 0; i < len(s); i++ {
		if (s[i] != '{' && s[i] != '[') || r.blocked[i] {
			continue
		}
		end := spanEnd(s, i)
		if end < 0 || !r.free(i, end) {
			continue
		}
		body := s[i:end]
		if calls, ok := r.callsIn(body); ok {
			start, stop := i, end
			for start > 0 && s[start-1] == '{' { // a doubled brace left unbalanced
				start--
			}
			for stop < len(s) && s[stop] == '}' {
				stop++
			}
			for k, c := range calls {
				if k == 0 {
					r.take(c.name, c.args, shapeJSON, start, stop)
				} else {
					r.out = append(r.out, nearMiss{name: c.name, args: c.args, shape: shapeJSON, start: stop, end: stop})
				}
			}
			i = stop - 1
			continue
		}
		raw, valid := lenientJSON(body)
		if s[i] == '{' && valid {
			if name, start, ok := r.nameBefore(i); ok && raw[0] == '{' && !schemaLike(raw) {
				r.take(name, string(raw), shapeNamed, start, end)
				i = end - 1
				continue
			}
		}
		if valid {
			r.block(i, end) // JSON, not a call: never look inside
			i = end - 1
		}
	}
}

// callsIn reads body as one call object or an array of them, unwrapping
// doubled braces.
func (r *nearMissReader) callsIn(body string) ([]nameArgs, bool) {
	for {
		if raw, ok := lenientJSON(body); ok {
			return callsOf(raw, r.resolve)
		}
		if !strings.HasPrefix(body, "{{") || !strings.HasSuffix(body, "}}") {
			return nil, false
		}
		body = strings.TrimSpace(body[1 : len(body)-1])
	}
}

// nameBefore finds a tool's name written just before the object at i,
// across whitespace, fences, tags and Harmony's "json" constraint: at the
// start of a line, after a tag, or as to=NAME.
func (r *nearMissReader) nameBefore(i int) (string, int, bool) {
	s, k := r.s, i
	for {
		k0 := k
		for k > 0 && isSpace(s[k-1]) {
			k--
		}
		if m := reFenceTail.FindStringIndex(s[max(0, k-32):k]); m != nil {
			k = max(0, k-32) + m[0]
		}
		if k > 0 && s[k-1] == '>' {
			if lt := strings.LastIndexByte(s[max(0, k-64):k-1], '<'); lt >= 0 {
				k = max(0, k-64) + lt
			}
		}
		if strings.HasSuffix(s[:k], "json") && k >= 5 && s[k-5] == '>' {
			k -= 4
		}
		if k == k0 {
			break
		}
	}
	j := k
	for j > 0 && (isIdentChar(s[j-1]) || s[j-1] == '.' || s[j-1] == '=' || s[j-1] == '-') {
		j--
	}
	word := s[j:k]
	if word == "" || !r.free(j, k) {
		return "", 0, false
	}
	if !strings.Contains(word, "=") && j > 0 && s[j-1] != '\n' && s[j-1] != '>' {
		return "", 0, false
	}
	name, ok := r.resolve(word)
	return name, j, ok
}

// noBraces takes "name": ..., "arguments": {...} written without the
// braces around it.
func (r *nearMissReader) noBraces() {
	for _, m := range reNoBraces.FindAllStringIndex(r.s, -1) {
		open := m[1] - 1
		end := spanEnd(r.s, open)
		if end < 0 || !r.free(m[0], end) {
			continue
		}
		raw, ok := lenientJSON("{" + r.s[m[0]:end] + "}")
		if !ok {
			continue
		}
		if calls, ok := callsOf(raw, r.resolve); ok && len(calls) == 1 {
			r.take(calls[0].name, calls[0].args, shapeBraces, m[0], end)
		}
	}
}

// python takes NAME(key=value, ...) calls that stand on their own line
// (alone, in a [...] list, in print(...), after Action:), never a call
// mentioned in a sentence.
func (r *nearMissReader) python() {
	var cands []nearMiss
	for _, m := range rePyCall.FindAllStringSubmatchIndex(r.s, -1) {
		if r.blocked[m[0]] {
			continue
		}
		name, ok := r.resolve(r.s[m[2]:m[3]])
		if !ok {
			continue
		}
		args, end, ok := pyArguments(r.s, m[1])
		if !ok || !r.free(m[0], end) {
			continue
		}
		cands = append(cands, nearMiss{name: name, args: args, shape: shapePython, start: m[0], end: end})
	}
	if len(cands) == 0 {
		return
	}
	// Lines as they read without the calls.
	masked := []byte(r.s)
	for _, c := range cands {
		for i := c.start; i < c.end; i++ {
			if masked[i] != '\n' {
				masked[i] = ' '
			}
		}
	}
	for _, c := range cands {
		ls := bytes.LastIndexByte(masked[:c.start], '\n') + 1
		le := bytes.IndexByte(masked[c.end:], '\n')
		if le < 0 {
			le = len(masked)
		} else {
			le += c.end
		}
		before := reTag.ReplaceAllString(string(masked[ls:c.start]), "")
		after := reTag.ReplaceAllString(string(masked[c.end:le]), "")
		if !rePyBefore.MatchString(before) || !rePyAfter.MatchString(after) {
			continue
		}
		start, end := c.start, c.end
		if p := strings.TrimRight(r.s[ls:start], " \t"); strings.HasSuffix(p, "print(") && strings.HasPrefix(r.s[end:], ")") {
			start, end = ls+len(p)-len("print("), end+1 // Gemma's print(default_api.f(...))
		}
		if r.free(start, end) {
			r.take(c.name, c.args, c.shape, start, end)
		}
	}
}

// nameArgs is one call read from JSON.
type nameArgs struct{ name, args string }

// callsOf reads raw (valid JSON) as a call object — name and arguments
// under any of nameKeys/argKeys, or OpenAI's {"function": {...}} — or an
// array of them, or {"tool_calls": [...]}. Every call must name a known
// tool and have arguments; an object with a description is a tool's
// definition, not a call.
func callsOf(raw json.RawMessage, resolve func(string) (string, bool)) ([]nameArgs, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	if raw[0] == '[' {
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
			return nil, false
		}
		var all []nameArgs
		for _, it := range items {
			cs, ok := callsOf(it, resolve)
			if !ok {
				return nil, false
			}
			all = append(all, cs...)
		}
		return all, true
	}
	var obj map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return nil, false
	}
	if tc, ok := obj["tool_calls"]; ok {
		return callsOf(tc, resolve)
	}
	if _, ok := obj["description"]; ok {
		return nil, false
	}
	if f := bytes.TrimSpace(obj["function"]); len(f) > 0 && f[0] == '{' {
		return callsOf(f, resolve)
	}
	name := ""
	for _, k := range nameKeys {
		if json.Unmarshal(obj[k], &name) == nil && name != "" {
			break
		}
		name = ""
	}
	resolved, ok := resolve(name)
	if !ok {
		return nil, false
	}
	for _, k := range argKeys {
		if v, ok := obj[k]; ok {
			args, ok := argumentsObject(v)
			if !ok {
				return nil, false
			}
			return []nameArgs{{resolved, args}}, true
		}
	}
	return nil, false
}

// argumentsObject is v, arguments, as a compact object: an object, a
// string holding one (JSON-encoded twice), or null/{} for none.
func argumentsObject(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if string(v) == "null" {
		return "{}", true
	}
	if len(v) > 0 && v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		if strings.TrimSpace(s) == "" {
			return "{}", true
		}
		raw, ok := lenientJSON(s)
		if !ok {
			return "", false
		}
		v = raw
	}
	if len(v) == 0 || v[0] != '{' || schemaLike(v) {
		return "", false
	}
	return string(compactJSON(v)), true
}

// schemaLike reports an object that is a JSON Schema (a tool's
// definition written out), not arguments.
func schemaLike(v json.RawMessage) bool {
	var o struct {
		Type       string          `json:"type"`
		Properties json.RawMessage `json:"properties"`
	}
	return json.Unmarshal(v, &o) == nil && o.Type == "object" && o.Properties != nil
}

// resolveToolName finds the known tool raw names: as written, or without
// quotes, a to= recipient prefix, or namespace prefixes (functions.,
// default_api.).
func resolveToolName(raw string, lookup func(string) (json.RawMessage, bool)) (string, bool) {
	n := strings.Trim(strings.TrimSpace(raw), "`'\"[]()*: ")
	if i := strings.LastIndexByte(n, '='); i >= 0 {
		n = n[i+1:]
	}
	for n != "" {
		if _, ok := lookup(n); ok {
			return n, true
		}
		i := strings.IndexByte(n, '.')
		if i < 0 {
			break
		}
		n = n[i+1:]
	}
	return "", false
}

// soleStringProperty is the one property of schema, or its one required
// property, when it is typed string; else "".
func soleStringProperty(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	var p string
	switch {
	case len(s.Properties) == 1:
		for k := range s.Properties {
			p = k
		}
	case len(s.Required) == 1:
		p = s.Required[0]
	default:
		return ""
	}
	var t string
	if json.Unmarshal(s.Properties[p].Type, &t) != nil || t != "string" {
		return ""
	}
	return p
}

// lenientJSON returns s as compact JSON, repaired when it is JSON as
// small models write it: single quotes, trailing commas, unquoted keys,
// True/False/None, comments. Anything else (bare words as values,
// unbalanced brackets, trailing text) is refused.
func lenientJSON(s string) (raw json.RawMessage, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	if json.Valid([]byte(s)) {
		return compactJSON(json.RawMessage(s)), true
	}
	if !plausibleJSON(s) {
		return nil, false
	}
	defer func() {
		if recover() != nil { // a library bug must not take the worker down
			raw, ok = nil, false
		}
	}()
	fixed, err := jsonrepair.Repair(s)
	if err != nil || !json.Valid([]byte(fixed)) {
		return nil, false
	}
	return compactJSON(json.RawMessage(fixed)), true
}

// plausibleJSON reports whether s is one bracketed JSON-like value whose
// only departures from JSON are those lenientJSON repairs.
func plausibleJSON(s string) bool {
	var stack []byte
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'':
			e := stringEnd(s, i)
			if e < 0 {
				return false
			}
			i = e
		case c == '{' || c == '[':
			stack = append(stack, c)
			i++
		case c == '}' || c == ']':
			if len(stack) == 0 || stack[len(stack)-1] != opener(c) {
				return false
			}
			stack = stack[:len(stack)-1]
			i++
			if len(stack) == 0 && strings.TrimSpace(s[i:]) != "" {
				return false
			}
		case c == ',' || c == ':' || isSpace(c):
			i++
		case c == '/' && strings.HasPrefix(s[i:], "//"):
			e := strings.IndexByte(s[i:], '\n')
			if e < 0 {
				return false
			}
			i += e
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			e := strings.Index(s[i+2:], "*/")
			if e < 0 {
				return false
			}
			i += e + 4
		case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
			for i < len(s) && strings.IndexByte("+-.0123456789eE", s[i]) >= 0 {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			if k >= len(s) || s[k] != ':' { // not an unquoted key
				switch s[i:j] {
				case "true", "false", "null", "True", "False", "None":
				default:
					return false
				}
			}
			i = j
		default:
			return false
		}
	}
	return len(stack) == 0
}

// spanEnd returns the end of the bracketed value starting at s[i], or -1
// when it does not close. A single quote opens a string only where a
// value or key can start (an apostrophe in text does not).
func spanEnd(s string, i int) int {
	var stack []byte
	prev := byte(0)
	for j := i; j < len(s); j++ {
		c := s[j]
		switch c {
		case '"':
			e := stringEnd(s, j)
			if e < 0 {
				return -1
			}
			j, prev = e-1, c
		case '\'':
			if prev == '{' || prev == '[' || prev == ',' || prev == ':' {
				e := stringEnd(s, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			}
			prev = c
		case '{', '[':
			stack = append(stack, c)
			prev = c
		case '}', ']':
			if len(stack) == 0 || stack[len(stack)-1] != opener(c) {
				return -1
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1
			}
			prev = c
		case ' ', '\t', '\n', '\r':
		default:
			prev = c
		}
	}
	return -1
}

// stringEnd returns the index after the closing quote of the string
// opening at s[i], or -1.
func stringEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return -1
}

func opener(c byte) byte {
	if c == '}' {
		return '{'
	}
	return '['
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// pyArguments reads Python keyword arguments from s[i:] (just after the
// opening parenthesis) up to the closing one, as a JSON object; it returns
// the index after the parenthesis. Positional arguments are refused.
func pyArguments(s string, i int) (string, int, bool) {
	var b strings.Builder
	b.WriteByte('{')
	for n := 0; ; n++ {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i < len(s) && s[i] == ')' {
			b.WriteByte('}')
			return b.String(), i + 1, true
		}
		j := i
		for j < len(s) && isIdentChar(s[j]) {
			j++
		}
		if j == i || !isIdentStart(s[i]) {
			return "", 0, false
		}
		key := s[i:j]
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		if j >= len(s) || s[j] != '=' || strings.HasPrefix(s[j:], "==") {
			return "", 0, false
		}
		j++
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		val, next, ok := pyValue(s, j)
		if !ok {
			return "", 0, false
		}
		if n > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(val)
		i = next
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		switch {
		case i < len(s) && s[i] == ',':
			i++
		case i < len(s) && s[i] == ')':
		default:
			return "", 0, false
		}
	}
}

// pyValue reads one Python literal at s[i] as JSON: a string, a number,
// True/False/None, or a list or dict (through lenientJSON).
func pyValue(s string, i int) (string, int, bool) {
	if i >= len(s) {
		return "", 0, false
	}
	switch s[i] {
	case '"', '\'':
		if q := s[i : i+1]; strings.HasPrefix(s[i:], q+q+q) {
			e := strings.Index(s[i+3:], q+q+q)
			if e < 0 {
				return "", 0, false
			}
			v, _ := json.Marshal(s[i+3 : i+3+e])
			return string(v), i + 6 + e, true
		}
		e := stringEnd(s, i)
		if e < 0 {
			return "", 0, false
		}
		v, _ := json.Marshal(pyUnquote(s[i:e]))
		return string(v), e, true
	case '{', '[':
		e := spanEnd(s, i)
		if e < 0 {
			return "", 0, false
		}
		raw, ok := lenientJSON(s[i:e])
		if !ok {
			return "", 0, false
		}
		return string(raw), e, true
	}
	j := i
	for j < len(s) && (isIdentChar(s[j]) || strings.IndexByte("+-.", s[j]) >= 0) {
		j++
	}
	switch tok := s[i:j]; tok {
	case "True", "true":
		return "true", j, true
	case "False", "false":
		return "false", j, true
	case "None", "null":
		return "null", j, true
	default:
		if f, err := strconv.ParseFloat(tok, 64); err == nil && tok != "" && !strings.ContainsAny(tok, "xXnNiI_") {
			if json.Valid([]byte(tok)) {
				return tok, j, true
			}
			return strconv.FormatFloat(f, 'g', -1, 64), j, true
		}
	}
	return "", 0, false
}

// pyUnquote decodes a quoted Python string literal (common escapes).
func pyUnquote(q string) string {
	body := q[1 : len(q)-1]
	if q[0] == '\'' {
		body = strings.ReplaceAll(body, `\'`, `'`)
		body = strings.ReplaceAll(body, `"`, `\"`)
	}
	if u, err := strconv.Unquote(`"` + body + `"`); err == nil {
		return u
	}
	return q[1 : len(q)-1]
}

// nearMissRest is content without the calls taken and the markup left
// around them: tags, emptied fences, brackets, and a lone short word just
// before a call (what is left of a damaged opening tag).
func nearMissRest(content string, calls []nearMiss) string {
	var b strings.Builder
	last := 0
	for _, c := range calls {
		if c.start < last {
			continue
		}
		b.WriteString(content[last:c.start])
		b.WriteByte(0)
		last = c.end
	}
	b.WriteString(content[last:])
	t := reMarkup.ReplaceAllString(b.String(), "")
	t = reEmptyFence.ReplaceAllString(t, "\x00")
	lines := strings.Split(t, "\n")
	var keep []string
	for i, l := range lines {
		tl := strings.TrimSpace(l)
		if strings.Trim(tl, "\x00[](){},; \t") == "" {
			continue
		}
		if reOneWord.MatchString(tl) {
			next := ""
			for _, n := range lines[i+1:] {
				if next = strings.TrimSpace(n); next != "" {
					break
				}
			}
			if strings.HasPrefix(next, "\x00") {
				continue
			}
		}
		keep = append(keep, strings.TrimRight(strings.ReplaceAll(l, "\x00", ""), " \t"))
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}

// The debris detector: an answer that reads as a failed attempt at a
// call, though nothing could be read from it.
var (
	reDebrisMarkup = regexp.MustCompile(`<\s*/?\s*tool_?calls?\b|\btool_?calls?\s*>|<function[=\s>]|</function>|\[TOOL_CALLS\]|<\|python_tag\|>|<\|tool_call\|>|<｜tool|<\|call\|>|to=functions\.|functools\[|</?tools>`)
	reArgKey       = regexp.MustCompile(`["']?\b(?:arguments|parameters|action_input|tool_input)\b["']?\s*:`)
	reNameValue    = regexp.MustCompile(`["']?\b(?:name|tool_name|tool|function|action)\b["']?\s*[:=]\s*["']?([\w.-]+)`)
	reActionLine   = regexp.MustCompile(`(?mi)^[ \t]*Action[ \t]*:[ \t]*[` + "`" + `'"\[]*([\w.-]+)`)
	rePyLine       = regexp.MustCompile(`(?m)^[ \t\[]*(?:print\()?([A-Za-z_][\w.]*)[ \t]*\(`)
	reWord         = regexp.MustCompile(`[A-Za-z_][\w.-]*`)
)

// debrisReason says why content looks like a failed attempt at a tool
// call (call markup, or argument JSON, beside a tool's name; an Action:
// line or a code line calling a tool), or "" when it reads as an answer.
// A tool's name in prose, markup or JSON alone are an answer.
func debrisReason(content string, lookup func(string) (json.RawMessage, bool)) string {
	if len(content) > maxNearMissIn {
		return ""
	}
	known := func(n string) bool { _, ok := resolveToolName(n, lookup); return ok }
	var names []string
	for _, w := range reWord.FindAllString(content, -1) {
		if n, ok := resolveToolName(w, lookup); ok && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	argKey := reArgKey.MatchString(content)
	if m := reDebrisMarkup.FindString(content); m != "" && (len(names) > 0 || argKey) {
		return fmt.Sprintf("it holds call markup (%s)%s, but no call that could be read", m, namesNote(names))
	}
	if argKey && !strings.Contains(content, `"description"`) && !strings.Contains(content, `"properties"`) {
		for _, m := range reNameValue.FindAllStringSubmatch(content, -1) {
			if known(m[1]) {
				return fmt.Sprintf("it holds argument JSON for the tool %s that could not be read", m[1])
			}
		}
	}
	for _, m := range reActionLine.FindAllStringSubmatch(content, -1) {
		if known(m[1]) {
			return fmt.Sprintf("it names the tool %s in an Action: line without arguments that could be read", m[1])
		}
	}
	for _, m := range rePyLine.FindAllStringSubmatch(content, -1) {
		if known(m[1]) {
			return fmt.Sprintf("it calls the tool %s as code, with arguments that could not be read (keyword arguments only)", m[1])
		}
	}
	return ""
}

func namesNote(names []string) string {
	if len(names) == 0 {
		return ""
	}
	if len(names) > 5 {
		names = names[:5]
	}
	return " naming " + strings.Join(names, ", ")
}
