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
		// Keys in the path (gateways, hosted MCP servers).
		"https://host/v1/sk-abc123def456ghi789/":                                   "https://host/v1/xxxxx/",
		"https://mcp.example.com/x7Kp2mQ9vL4nR8sT1wY6zB3c/sse":                     "https://mcp.example.com/xxxxx/sse",
		"https://mcp.example.com/8f14e45f-ceea-467f-a0e6-3a9b2c1d0e7f/sse?x=1":     "https://mcp.example.com/xxxxx/sse?x=1",
		"https://actions.example/mcp/ghp_16C7e42F292c6912E7710c838347Ae178B4a/sse": "https://actions.example/mcp/xxxxx/sse",
		"https://host/hooks/xoxb-1234-5678-abcdefgh":                               "https://host/hooks/xxxxx",
		"https://host/Bearer%20abc.def.ghi/mcp":                                    "https://host/xxxxx/mcp",
		"https://host/k/AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStU":                     "https://host/k/xxxxx",
		"https://host/bot110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe":       "https://host/xxxxx/getMe",
		"https://u:pw@host/v1/sk-abc123def456ghi789?api_key=k3y":                   "https://u:xxxxx@host/v1/xxxxx?api_key=xxxxx",
		"host/v1/sk-abc123def456ghi789":                                            "host/v1/xxxxx", // no scheme
		"https://host/sk-abc123def456ghi789#frag/sk-notpath":                       "https://host/xxxxx#frag/sk-notpath",
		// Path words and model names stay.
		"https://api.openai.com/v1/chat/completions":                                                          "https://api.openai.com/v1/chat/completions",
		"https://r.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/chat/completions":               "https://r.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18/chat/completions",
		"https://host/v1/models/claude-3-5-sonnet-20241022":                                                   "https://host/v1/models/claude-3-5-sonnet-20241022",
		"https://host/v1/projects/my-proj-123456/locations/us-central1/models/gemini-1.5-pro:generateContent": "https://host/v1/projects/my-proj-123456/locations/us-central1/models/gemini-1.5-pro:generateContent",
		"https://host/models/Qwen2.5-Coder-32B-Instruct/sk-learn-docs/bearer-token":                           "https://host/models/Qwen2.5-Coder-32B-Instruct/sk-learn-docs/bearer-token",
		"https://host/internationalization/0123456789012345678901":                                            "https://host/internationalization/0123456789012345678901",
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
		{"https://mcp.example.com/x7Kp2mQ9vL4nR8sT1wY6zB3c/sse", []string{"x7Kp2mQ9vL4nR8sT1wY6zB3c"},
			`Get "https://mcp.example.com/x7Kp2mQ9vL4nR8sT1wY6zB3c/sse": EOF`, `Get "https://mcp.example.com/xxxxx/sse": EOF`},
		{"https://host/v1/sk-abc%2D123def456ghi/", []string{"sk-abc%2D123def456ghi", "sk-abc-123def456ghi"},
			`401 for key sk-abc-123def456ghi`, `401 for key xxxxx`},
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
