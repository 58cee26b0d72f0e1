package clienttools

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// WireVersion is the "v" of the request and answer messages.
const WireVersion = 1

// Version is a message's "v". It reads any JSON number of integral value,
// as the schemas do ("const": 1 holds for 1.0 and 1e0, which some encoders
// write): decoded into an int, an answer with "v": 1.0 was refused as
// undecodable and its call waited out the timeout. A string or a fraction
// is refused.
type Version int

// UnmarshalJSON implements [json.Unmarshaler].
func (v *Version) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as for an int: left alone
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return fmt.Errorf("v is %s, not an integer", b)
	}
	*v = Version(f)
	return nil
}

// MinSecretLen is the shortest accepted per-job secret (NewSecret makes 43).
const MinSecretLen = 32

// Request is what the worker publishes on <prefix>.client.<job_id>, with a
// reply subject (the worker's own inbox) to answer to.
// schemas/client_request.schema.json describes it.
type Request struct {
	V     Version `json:"v"`
	ID    string  `json:"id"`
	JobID string  `json:"job_id"`
	Tool  string  `json:"tool"`
	// Arguments is the JSON object text of the arguments. It is a string, as
	// in OpenAI tool calls, so that every language can MAC the exact bytes.
	Arguments string `json:"arguments"`
	// DeadlineMS is when the worker stops waiting (Unix milliseconds).
	DeadlineMS int64 `json:"deadline_ms"`
	// IdempotencyKey is the same for every request of one call, in every
	// attempt of the job (internal/journal); not covered by the MAC.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	MAC            string `json:"mac"`
}

// Answer is what the submitter publishes to the request's reply subject.
// schemas/client_response.schema.json describes it.
type Answer struct {
	V       Version `json:"v"`
	ID      string  `json:"id"` // the request's id
	Output  string  `json:"output"`
	IsError bool    `json:"is_error,omitempty"`
	MAC     string  `json:"mac"`
}

var (
	tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	nameRE  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// Subject is the subject client tool requests of a job are published on.
func Subject(prefix, jobID string) string { return prefix + ".client." + jobID }

// NewSecret returns a fresh per-job secret: 32 random bytes, base64url.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("clienttools: secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func checkSecret(secret string) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("%w: secret shorter than %d bytes", ErrConfig, MinSecretLen)
	}
	return nil
}

// The MACs are HMAC-SHA256 keyed with the secret's bytes over a
// newline-joined text whose first line names the message kind (so a request
// MAC can never pass as an answer MAC); every field but the last is a token
// without newlines, so the text parses one way only.
func requestText(r *Request) string {
	return strings.Join([]string{"jetagent.client.request.v1", r.ID, r.JobID, r.Tool, strconv.FormatInt(r.DeadlineMS, 10), r.Arguments}, "\n")
}

func answerText(a *Answer) string {
	e := "0"
	if a.IsError {
		e = "1"
	}
	return strings.Join([]string{"jetagent.client.answer.v1", a.ID, e, a.Output}, "\n")
}

func mac(secret, text string) string {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

func macOK(secret, text, got string) bool {
	want := mac(secret, text)
	return hmac.Equal([]byte(want), []byte(strings.ToLower(got)))
}

// Sign sets r.MAC.
func (r *Request) Sign(secret string) { r.MAC = mac(secret, requestText(r)) }

// Verify checks the version, the field shapes and the MAC.
func (r *Request) Verify(secret string) error {
	switch {
	case r.V != WireVersion:
		return fmt.Errorf("%w: version %d", ErrRejected, r.V)
	case !tokenRE.MatchString(r.ID), !tokenRE.MatchString(r.JobID), !nameRE.MatchString(r.Tool):
		return fmt.Errorf("%w: malformed id, job_id or tool", ErrRejected)
	case !macOK(secret, requestText(r), r.MAC):
		return fmt.Errorf("%w: bad mac", ErrRejected)
	}
	return nil
}

// Sign sets a.MAC.
func (a *Answer) Sign(secret string) { a.MAC = mac(secret, answerText(a)) }

// Verify checks the version, that a answers request id, and the MAC.
func (a *Answer) Verify(secret, id string) error {
	switch {
	case a.V != WireVersion:
		return fmt.Errorf("%w: version %d", ErrRejected, a.V)
	case a.ID != id:
		return fmt.Errorf("%w: answer to another request", ErrRejected)
	case !macOK(secret, answerText(a), a.MAC):
		return fmt.Errorf("%w: bad mac", ErrRejected)
	}
	return nil
}
