package redact_test

import (
	"fmt"
	"slices"
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
		// Credentials in the query (hosted MCP servers, signed URLs).
		"https://host/mcp?api_key=SECRETQ123":                      "https://host/mcp?api_key=xxxxx",
		"https://host/sse?apiKey=s3cr3t&profile=dev":               "https://host/sse?apiKey=xxxxx&profile=dev",
		"https://host/mcp?x=1&access_token=abc.def#frag":           "https://host/mcp?x=1&access_token=xxxxx#frag",
		"https://b.s3.example/o?X-Amz-Signature=ff00&X-Amz-Date=1": "https://b.s3.example/o?X-Amz-Signature=xxxxx&X-Amz-Date=1",
		"https://u:pw@host/mcp?token=t&page=2":                     "https://u:xxxxx@host/mcp?token=xxxxx&page=2",
		"https://host/mcp?api%5Fkey=v":                             "https://host/mcp?api%5Fkey=xxxxx", // escaped name
		"https://host/mcp?key=":                                    "https://host/mcp?key=",            // nothing to hide
		"https://host/mcp?monkey=banana&keyboard=qwerty":           "https://host/mcp?monkey=banana&keyboard=qwerty",
		"https://host/v1?api-version=2024-10-21":                   "https://host/v1?api-version=2024-10-21",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecretsAndText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		secrets []string
		text    string // quoting the URL, as a transport's error does
		want    string
	}{
		{"http://127.0.0.1:1/mcp?api_key=SECRETQ456", []string{"SECRETQ456"},
			`Post "http://127.0.0.1:1/mcp?api_key=SECRETQ456": dial tcp 127.0.0.1:1: connect: connection refused`,
			`Post "http://127.0.0.1:1/mcp?api_key=xxxxx": dial tcp 127.0.0.1:1: connect: connection refused`},
		{"https://u:pa%24%24word@host/mcp", []string{"pa%24%24word", "pa$$word"},
			`auth for pa$$word failed`, `auth for xxxxx failed`},
		{"https://tok3n@host/mcp?token=a%2Bb%3D", []string{"tok3n", "a%2Bb%3D", "a+b="},
			`GET https://host/mcp?token=a%2Bb%3D: 401`, `GET https://host/mcp?token=xxxxx: 401`},
		{"https://host/mcp?key=abc&page=12345", nil, `page 12345`, `page 12345`}, // short value, other params
		{"https://host/mcp", nil, "https://host/mcp: EOF", "https://host/mcp: EOF"},
	}
	for _, tc := range tests {
		got := redact.Secrets(tc.url)
		if !slices.Equal(got, tc.secrets) {
			t.Errorf("Secrets(%q) = %q, want %q", tc.url, got, tc.secrets)
		}
		if out := redact.Text(tc.text, got); out != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.text, out, tc.want)
		}
	}
}

func ExampleURL() {
	fmt.Println(redact.URL("https://user:sk-secret@proxy.example/v1"))
	fmt.Println(redact.URL("https://mcp.example/sse?api_key=sk-secret"))
	// Output:
	// https://user:xxxxx@proxy.example/v1
	// https://mcp.example/sse?api_key=xxxxx
}
