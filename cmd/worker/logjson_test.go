package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
)

// JSON logs wrote durations as bare nanoseconds ("grace":30000000000)
// while text logs and the variables write 30s (seen by a helper).
func TestJSONLogDurations(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	newLogger(Config{LogFormat: "json", LogLevel: "info"}, &b).Info("shutting down", "grace", 30*time.Second,
		slog.Group("g", "down_for", 1500*time.Millisecond), "n", 3)
	var line struct {
		Grace string `json:"grace"`
		G     struct {
			DownFor string `json:"down_for"`
		} `json:"g"`
		N int `json:"n"`
	}
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if line.Grace != "30s" || line.G.DownFor != "1.5s" || line.N != 3 {
		t.Errorf("logged %s", b.String())
	}
}
