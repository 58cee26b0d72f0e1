package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Every enum-valued setting is taken in any case, as JETAGENT_LOG_LEVEL
// and JETAGENT_CONTENT_CALLS always were: JETAGENT_LOG_FORMAT=JSON and
// JETAGENT_TOOL_MODE=Search were refused. A value that is none of them is
// still refused, quoted as written.
func TestEnumSettingsInAnyCase(t *testing.T) {
	// Not parallel: it sets environment variables.
	tests := []struct {
		variable, value string
		got             func(Settings) string
		want            string // "": refused
	}{
		{"JETAGENT_LOG_LEVEL", "DEBUG", func(s Settings) string { return s.LogLevel }, "debug"},
		{"JETAGENT_LOG_LEVEL", "Warn", func(s Settings) string { return s.LogLevel }, "warn"},
		{"JETAGENT_LOG_FORMAT", "JSON", func(s Settings) string { return s.LogFormat }, "json"},
		{"JETAGENT_LOG_FORMAT", "Text", func(s Settings) string { return s.LogFormat }, "text"},
		{"JETAGENT_TOOL_MODE", "Search", func(s Settings) string { return s.ToolMode }, "search"},
		{"JETAGENT_TOOL_MODE", "CODE", func(s Settings) string { return s.ToolMode }, "code"},
		{"JETAGENT_CONTENT_CALLS", "OFF,GPT-4*=On", func(s Settings) string {
			c := s.loopConfig().ContentCalls
			return string(c.Default) + "," + c.Models[0].Model + "=" + string(c.Models[0].Mode) // the glob keeps its case
		}, "off,GPT-4*=on"},
		{"JETAGENT_LOG_FORMAT", "Jsonl", nil, ""},
		{"JETAGENT_TOOL_MODE", "Magic", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.variable+"="+tc.value, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test")
			t.Setenv("JETAGENT_DATA_DIR", t.TempDir())
			t.Setenv(tc.variable, tc.value)
			s, err := loadSettings()
			if tc.want == "" {
				if want := "invalid " + tc.variable + `: "` + tc.value + `" is not`; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(s); got != tc.want {
				t.Errorf("%s=%s read as %q, want %q", tc.variable, tc.value, got, tc.want)
			}
		})
	}
	// JETAGENT_LOG_FORMAT=JSON logs JSON (it fell back to text when
	// newLogger compared the value as written).
	t.Run("JSON logs", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "sk-test")
		t.Setenv("JETAGENT_DATA_DIR", t.TempDir())
		t.Setenv("JETAGENT_LOG_FORMAT", "JSON")
		t.Setenv("JETAGENT_LOG_LEVEL", "ERROR")
		s, err := loadSettings()
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		log := newLogger(s.Config, &b)
		log.Warn("not shown")
		log.Error("shown")
		var m map[string]any
		if err := json.Unmarshal(b.Bytes(), &m); err != nil || m["msg"] != "shown" {
			t.Errorf("log %q: %v", b.String(), err)
		}
	})
}
