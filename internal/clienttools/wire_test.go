package clienttools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The vectors were computed independently (Python hmac/hashlib), so that a
// service in another language can check its implementation against them.
func TestMACVectors(t *testing.T) {
	t.Parallel()
	req := Request{V: 1, ID: "5f2b0c1e9a7d4c3b8e6f1a2b3c4d5e6f", JobID: "job-42", Tool: "read_file",
		Arguments: `{"path":"/tmp/a.txt"}`, DeadlineMS: 1767225600000}
	req.Sign(testSecret)
	if want := "9a485c745078f52e3ce543fafbbd3dbf2c7bb2653044b09de8602b79a15234a9"; req.MAC != want {
		t.Errorf("request mac %s, want %s", req.MAC, want)
	}
	a := Answer{V: 1, ID: req.ID, Output: "hello"}
	a.Sign(testSecret)
	if want := "5deea9c16b40f95d2830322780a8f9a4c946b513f2523609a4ea917fac471bda"; a.MAC != want {
		t.Errorf("answer mac %s, want %s", a.MAC, want)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	good := func() Request {
		r := Request{V: 1, ID: "abc", JobID: "j1", Tool: "t", Arguments: `{}`, DeadlineMS: 1}
		r.Sign(testSecret)
		return r
	}
	reqTests := []struct {
		name   string
		mutate func(*Request)
		ok     bool
	}{
		{"valid", func(*Request) {}, true},
		{"upper-case hex mac", func(r *Request) { r.MAC = strings.ToUpper(r.MAC) }, true},
		{"tampered arguments", func(r *Request) { r.Arguments = `{"x":1}` }, false},
		{"tampered tool", func(r *Request) { r.Tool = "u" }, false},
		{"tampered deadline", func(r *Request) { r.DeadlineMS++ }, false},
		{"other job", func(r *Request) { r.JobID = "j2" }, false},
		{"newline smuggled into tool", func(r *Request) { r.Tool = "t\nx"; r.Sign(testSecret) }, false},
		{"version 2", func(r *Request) { r.V = 2; r.Sign(testSecret) }, false},
		{"empty mac", func(r *Request) { r.MAC = "" }, false},
		{"other secret", func(r *Request) { r.Sign(strings.Repeat("s", 32)) }, false},
	}
	for _, tt := range reqTests {
		t.Run("request/"+tt.name, func(t *testing.T) {
			t.Parallel()
			r := good()
			tt.mutate(&r)
			err := r.Verify(testSecret)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrRejected)) {
				t.Errorf("Verify = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	// A request's MAC never passes as an answer's, even with equal fields.
	r := good()
	a := Answer{V: 1, ID: r.ID, Output: r.Arguments, MAC: r.MAC}
	if err := a.Verify(testSecret, r.ID); err == nil {
		t.Error("request mac accepted on an answer")
	}
	a.Sign(testSecret)
	if err := a.Verify(testSecret, "other"); err == nil {
		t.Error("answer accepted for another request id")
	}
	a.IsError = true
	if err := a.Verify(testSecret, r.ID); err == nil {
		t.Error("answer with flipped is_error accepted")
	}
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if a == b || len(a) < MinSecretLen || checkSecret(a) != nil {
		t.Errorf("secrets %q %q", a, b)
	}
}

func TestWireJSONFieldNames(t *testing.T) {
	t.Parallel()
	b, _ := json.Marshal(Request{V: 1, ID: "i", JobID: "j", Tool: "t", Arguments: "{}", DeadlineMS: 5, MAC: "m"})
	if want := `{"v":1,"id":"i","job_id":"j","tool":"t","arguments":"{}","deadline_ms":5,"mac":"m"}`; string(b) != want {
		t.Errorf("request %s\nwant    %s", b, want)
	}
	b, _ = json.Marshal(Answer{V: 1, ID: "i", Output: "o", IsError: true, MAC: "m"})
	if want := `{"v":1,"id":"i","output":"o","is_error":true,"mac":"m"}`; string(b) != want {
		t.Errorf("answer %s\nwant   %s", b, want)
	}
}
