package redact_test

import (
	"fmt"
	"testing"

	"github.com/jetagent/jetagent/internal/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://host:8080/mcp":              "http://host:8080/mcp",
		"https://u:pw@host/mcp?x=1":         "https://u:xxxxx@host/mcp?x=1",
		"https://tok3n@host/mcp":            "https://xxxxx@host/mcp",
		"http://u:p@ss@host:x/mcp":          "http://u:xxxxx@host:x/mcp", // does not parse
		"u:pw@host/mcp":                     "u:xxxxx@host/mcp",          // no scheme
		"nats://t0ken@b:4222":               "nats://xxxxx@b:4222",
		"https://host/mcp/@scope/pkg":       "https://host/mcp/@scope/pkg",
		"https://host/mcp?next=a@b.example": "https://host/mcp?next=a@b.example",
		"":                                  "",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func ExampleURL() {
	fmt.Println(redact.URL("https://user:sk-secret@proxy.example/v1"))
	// Output: https://user:xxxxx@proxy.example/v1
}
