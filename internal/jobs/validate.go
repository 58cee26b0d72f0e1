package jobs

import (
	"github.com/jetagent/jetagent/internal/llm"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/jetagent/jetagent/internal/textdist"
	"github.com/jetagent/jetagent/schemas"
)

// DefaultMaxJobBytes is the default size limit of a job payload.
const DefaultMaxJobBytes = 1 << 20

// minJobBytes is the smallest job size limit a worker accepts.
const minJobBytes = 1024

// Validator checks payloads against the embedded schemas. The worker and
// the submit CLI use the same one, so they refuse a job with the same words.
// It is safe for concurrent use.
type Validator struct {
	maxBytes int
	schemas  map[string]*jsonschema.Schema
	// docs are the schema documents by URL, for the names an object
	// allows when a job gives another (suggest).
	docs map[string]any
}

// NewValidator compiles every schema in schemas.FS. maxJobBytes <= 0 means
// DefaultMaxJobBytes.
func NewValidator(maxJobBytes int) (*Validator, error) {
	if maxJobBytes <= 0 {
		maxJobBytes = DefaultMaxJobBytes
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	files, err := fs.Glob(schemas.FS, "*.schema.json")
	if err != nil {
		return nil, err
	}
	docs := map[string]any{}
	for _, f := range files {
		b, err := fs.ReadFile(schemas.FS, f)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", f, err)
		}
		if err := c.AddResource(schemas.Base+f, doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", f, err)
		}
		docs[schemas.Base+f] = doc
	}
	v := &Validator{maxBytes: maxJobBytes, schemas: map[string]*jsonschema.Schema{}, docs: docs}
	for _, f := range files {
		s, err := c.Compile(schemas.Base + f)
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", f, err)
		}
		v.schemas[f] = s
	}
	return v, nil
}

// MaxJobBytes is the configured job size limit.
func (v *Validator) MaxJobBytes() int { return v.maxBytes }

// DecodeJob checks a job payload at the door: size, JSON, schema. The error
// wraps ErrTooLarge, ErrNotJSON or ErrSchema, and its text is the reason
// recorded in the dead-letter stream and the job's state.
func (v *Validator) DecodeJob(data []byte) (*Job, error) {
	if len(data) > v.maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), v.maxBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 { // the JSON reader would say only "EOF"
		what := "the body is empty"
		if len(data) > 0 {
			what += fmt.Sprintf(" (%d bytes of white space)", len(data))
		}
		return nil, fmt.Errorf("%w: %s", ErrNotJSON, what)
	}
	if err := checkEncoding(data); err != nil {
		return nil, err
	}
	if err := v.Validate(schemas.Job, data); err != nil {
		return nil, err
	}
	if err := checkDuplicateNames(data); err != nil {
		return nil, err
	}
	if err := checkSurrogates(data); err != nil {
		return nil, err
	}
	var j Job
	if err := UnmarshalJob(data, &j); err != nil {
		return nil, err
	}
	if strings.TrimSpace(j.Task) == "" {
		// minLength lets "   " through, and the loop would then fail the job
		// ("task is empty") after it was taken: refused here, it is
		// dead-lettered with the reason (and submit refuses it first).
		return nil, fmt.Errorf("%w%w: at '/task': only white space", ErrSchema, errBeyondSchema)
	}
	if err := checkHistory(j.History); err != nil {
		return nil, err
	}
	return &j, nil
}

// UnmarshalJob decodes the JSON object data over j as DecodeJob does
// (members data lacks keep j's values: defaults), without DecodeJob's
// checks. max_rounds goes through json.Number: the schema's integer admits
// 1.0 and 1e2, which encoding/json will not put in an int ("cannot
// unmarshal number 1.0 into Go struct field Job.max_rounds of type int"),
// so a job the worker runs was refused by code decoding it directly.
func UnmarshalJob(data []byte, j *Job) error {
	type plain Job
	aux := struct {
		*plain
		MaxRounds json.Number `json:"max_rounds,omitempty"`
	}{plain: (*plain)(j)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return fmt.Errorf("%w: %w", ErrSchema, err)
	}
	if aux.MaxRounds != "" {
		f, err := aux.MaxRounds.Float64()
		if err != nil || f != float64(int(f)) {
			return fmt.Errorf("%w: max_rounds %s is not an integer", ErrSchema, aux.MaxRounds)
		}
		j.MaxRounds = int(f)
	}
	return nil
}

// errBeyondSchema marks the door's refusals of jobs the schema accepts
// (checkEncoding, checkDuplicateNames, a blank task), for the decoder's
// fuzz test, which holds the schema and the decoder to agree otherwise.
// Its text is empty: the reasons read as before.
var errBeyondSchema = beyondSchema{}

type beyondSchema struct{}

func (beyondSchema) Error() string { return "" }

// checkEncoding refuses what encoding/json and the schema library accept
// but change: bytes that are not UTF-8 each become U+FFFD, so the task run
// would not be the task sent (RFC 8259 asks for UTF-8). A byte order mark
// is named, rather than reported as a stray character 'ï'.
func checkEncoding(data []byte) error {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return fmt.Errorf("%w%w: it starts with a UTF-8 byte order mark (send the JSON without it)", ErrNotJSON, errBeyondSchema)
	}
	if !utf8.Valid(data) {
		n := 0
		for n < len(data) {
			r, size := utf8.DecodeRune(data[n:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			n += size
		}
		return fmt.Errorf("%w%w: not valid UTF-8 (at byte %d)", ErrNotJSON, errBeyondSchema, n)
	}
	return nil
}

// checkDuplicateNames refuses a member name given twice in one object,
// anywhere in the job. encoding/json and the schema library keep the last,
// while a gateway or policy check in another language may have read the
// first: the job run would not be the job checked (I-JSON, RFC 7493,
// forbids duplicates). data is valid JSON (the schema check read it), so
// its nesting is bounded by encoding/json's depth limit.
func checkDuplicateNames(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var value func(path string) error
	value = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return nil // not expected after the schema check; it reports syntax
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return nil
				}
				name, _ := tok.(string)
				if seen[name] {
					return fmt.Errorf("%w%w: member %q appears twice at '%s'", ErrNotJSON, errBeyondSchema, name, path)
				}
				seen[name] = true
				if err := value(path + "/" + name); err != nil {
					return err
				}
			}
			_, _ = dec.Token() // '}'
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := value(path + "/" + strconv.Itoa(i)); err != nil {
					return err
				}
			}
			_, _ = dec.Token() // ']'
		}
		return nil
	}
	return value("")
}

// checkHistory closes what the schema cannot see: encoding/json matches
// keys without regard to case, so {"role":"user","ROLE":"x"} passes the
// schema and decodes to role "x"; and the order of calls and results
// (llm.CheckHistory). A tool call without a type is a
// function call (the only kind there is), so it re-encodes as valid.
func checkHistory(msgs []llm.Message) error {
	for i := range msgs {
		switch msgs[i].Role {
		case llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool:
		default:
			return fmt.Errorf("%w: at '/history/%d/role': %q is not one of system, user, assistant, tool (keys are case-sensitive)", ErrSchema, i, msgs[i].Role)
		}
		for k := range msgs[i].ToolCalls {
			switch msgs[i].ToolCalls[k].Type {
			case "":
				msgs[i].ToolCalls[k].Type = "function"
			case "function":
			default:
				return fmt.Errorf("%w: at '/history/%d/tool_calls/%d/type': %q is not \"function\" (keys are case-sensitive)", ErrSchema, i, k, msgs[i].ToolCalls[k].Type)
			}
		}
	}
	// Refused here, at the submitter and at the door, rather than by the
	// provider (a 400) once a worker has taken the job.
	if err := llm.CheckHistory(msgs); err != nil {
		return fmt.Errorf("%w%w: the history is no chat history a model takes: %w", ErrSchema, errBeyondSchema, err)
	}
	return nil
}

// Validate checks data against one schema of schemas.FS (a schemas.*
// constant). Errors wrap ErrNotJSON or ErrSchema; the schema error lists
// every failing location, e.g. "at '/task': minLength: got 0, want 1".
func (v *Validator) Validate(schemaFile string, data []byte) error {
	s, ok := v.schemas[schemaFile]
	if !ok {
		return fmt.Errorf("no schema %q", schemaFile)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotJSON, err)
	}
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w: %s", ErrSchema, v.flatten(ve))
		}
		return fmt.Errorf("%w: %w", ErrSchema, err)
	}
	return nil
}

// ValidateValue marshals v and validates it (for payloads built in Go).
func (v *Validator) ValidateValue(schemaFile string, x any) error {
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	return v.Validate(schemaFile, b)
}

// flatten joins the leaf causes into one line, the form a dead letter's
// reason header and a terminal can both show. A member the schema does not
// allow is followed by the allowed one it is probably a typo of.
func (v *Validator) flatten(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			k, extra := e.ErrorKind.(*kind.AdditionalProperties)
			if extra {
				slices.Sort(k.Properties) // the library's come in map order
			}
			leaf := strings.TrimSpace(e.Error())
			if extra {
				leaf += v.suggest(e.SchemaURL, k.Properties)
			}
			if k, ok := e.ErrorKind.(*kind.Enum); ok {
				leaf += suggestValue(k)
			}
			leaves = append(leaves, leaf)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(leaves) // causes come in map order; the reason must not vary
	return strings.Join(leaves, "; ")
}

// suggestValue names the allowed string a string not among an enum's is
// probably a typo of: " (did you mean 'search'?)", or "".
func suggestValue(k *kind.Enum) string {
	got, ok := k.Got.(string)
	if !ok {
		return ""
	}
	var want []string
	for _, w := range k.Want {
		if w, ok := w.(string); ok {
			want = append(want, w)
		}
	}
	best := textdist.Closest(got, want)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean '%s'?)", best)
}

// suggest names, for members an object may not have, the allowed members
// of the schema at schemaURL they are probably typos of: " (did you mean
// 'tool_mode'?)", or "".
func (v *Validator) suggest(schemaURL string, extra []string) string {
	base, ptr, _ := strings.Cut(schemaURL, "#")
	node := v.docs[base]
	for _, seg := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if seg == "" {
			continue
		}
		m, ok := node.(map[string]any)
		if !ok {
			return ""
		}
		node = m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]
	}
	m, _ := node.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	type hint struct{ from, to string }
	var hints []hint
	names := slices.Sorted(maps.Keys(props)) // ties go to the first, the same each run
	for _, x := range extra {
		if best := textdist.Closest(x, names); best != "" {
			hints = append(hints, hint{x, best})
		}
	}
	switch {
	case len(hints) == 0:
		return ""
	case len(extra) == 1:
		return fmt.Sprintf(" (did you mean '%s'?)", hints[0].to)
	}
	parts := make([]string, len(hints))
	for i, h := range hints {
		parts[i] = fmt.Sprintf("'%s' for '%s'", h.to, h.from)
	}
	return " (did you mean " + strings.Join(parts, ", ") + "?)"
}

// CheckServers returns ErrUnknownServer naming the first server of the job
// that known does not accept. A nil known accepts none: a worker without
// MCP configuration has no servers to offer. names, when given, are the
// configured servers: the error lists them, and names the one a misspelt
// server probably meant.
func CheckServers(j *Job, known func(string) bool, names ...string) error {
	for _, s := range j.Servers {
		if known != nil && known(s) {
			continue
		}
		switch near := textdist.Closest(s, names); {
		case near != "":
			return fmt.Errorf("%w: %q (did you mean %q? configured: %s)", ErrUnknownServer, s, near, strings.Join(names, ", "))
		case len(names) > 0:
			return fmt.Errorf("%w: %q (configured: %s)", ErrUnknownServer, s, strings.Join(names, ", "))
		case known == nil:
			return fmt.Errorf("%w: %q (this worker has no MCP servers)", ErrUnknownServer, s)
		}
		return fmt.Errorf("%w: %q", ErrUnknownServer, s)
	}
	return nil
}

// ErrWrongQueue: the job's body names a queue other than the one it was
// published on. Running it on the queue it came from would give it
// another queue's workers (models, servers) without a word.
var ErrWrongQueue = reject("job names another queue than the one it was published on")

// CheckQueue returns ErrWrongQueue when the job's queue field names a
// queue other than queue, the one whose subject carried it.
func CheckQueue(j *Job, queue string, n Names) error {
	if j.Queue != "" && j.Queue != queue {
		return fmt.Errorf("%w: its queue is %q but it was published on %s (queue %q): publish it on %s, "+
			"or leave the queue field out", ErrWrongQueue, j.Queue, n.JobsSubject(queue), queue, n.JobsSubject(j.Queue))
	}
	return nil
}
