package journal_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jetagent/jetagent/internal/journal"
)

// FuzzReplay: whatever an earlier attempt left (even damaged), New either
// refuses it or gives a journal under which a completed call never runs
// again and nothing panics.
func FuzzReplay(f *testing.F) {
	for _, s := range []string{
		`{"kind":"done","name":"w","args":{},"idempotency_key":"j/c","result":{"text":"ok"}}`,
		`{"kind":"intent","name":"w","args":{"a":1},"idempotency_key":"j/c"}`,
		`{"kind":"value","value":{"message":{}},"intents":{"c1.0":{"name":"w","args":{},"idempotency_key":"j/c"}}}`,
		`{"kind":"done","name":"w","args":{}}`,
		`{"kind":"value"}`, `{}`, `null`, `[]`, `{"kind":"done","result":null}`,
	} {
		f.Add("c1.0", []byte(s), "w", []byte(`{}`))
	}
	f.Fuzz(func(t *testing.T, key string, raw []byte, name string, args []byte) {
		j, err := journal.New(&memStore{}, map[string][]byte{key: raw})
		if err != nil {
			return
		}
		_ = j.Prior()
		_, _ = j.Value(key)
		var e struct {
			Kind   string          `json:"kind"`
			Name   string          `json:"name"`
			Args   json.RawMessage `json:"args"`
			Result *journal.Result `json:"result"`
		}
		_ = json.Unmarshal(raw, &e)
		ran := false
		_, st, _ := j.Do(context.Background(), key, journal.Call{Name: name, Args: args}, func(context.Context) (journal.Result, error) {
			ran = true
			return journal.Result{}, nil
		})
		if e.Kind == "done" && e.Result != nil && ran {
			t.Fatalf("a completed call ran again (status %v)", st)
		}
		if e.Kind == "intent" && ran && st != journal.Resent {
			t.Fatalf("an interrupted call ran with status %v", st)
		}
	})
}
