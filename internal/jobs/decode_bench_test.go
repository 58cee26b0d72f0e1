package jobs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkDecodeJob is the door's cost per job (schema, encoding and
// duplicate-name checks, decoding), and the duplicate-name check alone:
// a small job and one with a 400-message history.
func BenchmarkDecodeJob(b *testing.B) {
	v, err := NewValidator(0)
	if err != nil {
		b.Fatal(err)
	}
	small := []byte(`{"id":"job-1","task":"What is the weather in Lisbon right now, and what is 19.5 + 22.5?","servers":["demo"]}`)
	var hist []map[string]any
	for i := 0; i < 400; i++ {
		hist = append(hist, map[string]any{"role": "user", "content": strings.Repeat(fmt.Sprint("word ", i), 40)})
	}
	bigJSON, _ := json.Marshal(map[string]any{"id": "job-2", "task": "go on", "history": hist})
	for _, c := range []struct {
		name string
		data []byte
	}{{"small", small}, {fmt.Sprintf("history_%dKB", len(bigJSON)>>10), bigJSON}} {
		b.Run(c.name+"/decode", func(b *testing.B) {
			for b.Loop() {
				if _, err := v.DecodeJob(c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/dupcheck", func(b *testing.B) {
			for b.Loop() {
				_ = checkDuplicateNames(c.data)
			}
		})
	}
}
