package redact_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/redact"
)

// TestURLSplitTokens: a base64url token (random, with '-' and '_' among
// its characters) split into runs shorter than 20 was shown whole, while
// model names, slugs and ordinary hostnames must stay readable.
func TestURLSplitTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://mcp.example.com/s/Qm3x-Zp8kLw2_Vb9nRt4-Yc7hJq1/sse", "https://mcp.example.com/s/xxxxx/sse"},
		{"https://mcp.example.com/s/k9F-2mQx_7Lp4-vB8z_Nw3T-r6Y/mcp", "https://mcp.example.com/s/xxxxx/mcp"},
		{"https://hooks.example/T01AB2CD3/B0-4Ef5Gh6_Ij7Kl8-Mn9Op", "https://hooks.example/T01AB2CD3/xxxxx"},
		// These stay.
		{"https://host/v1/models/Mixtral-8x7B-Instruct-v0.1", ""},
		{"https://host/v1/models/Mixtral-8x22B-Instruct-v0.1/chat", ""},
		{"https://host/v1/models/accounts/fireworks/models/llama-v3p1-405b-instruct", ""},
		{"https://host/openai/deployments/gpt-4o-mini-2024-07-18/chat/completions", ""},
		{"https://host/models/sentence-transformers_all-MiniLM-L6-v2", ""},
		{"https://host/models/Qwen2-VL-72B-Instruct/Phi-3-mini-4k-instruct", ""},
		{"https://host/models/anthropic.claude-3-5-sonnet-20240620-v1:0/invoke", ""},
		{"https://host/models/o3-mini-2025-01-31/meta-llama_Llama-3.3-70B-Instruct-Turbo", ""},
		{"https://host/blog/2024-07-18-how-we-moved-to-gpt4o-and-llama3-70b", ""},
		{"https://host/files/report_2024_Q3_v2_final-EU-west1.pdf", ""},
	} {
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if got := redact.URL(tc.in); got != want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, want)
		}
	}
}

// TestURLFragmentAndHost: credentials in a fragment (an OAuth implicit
// grant's #access_token=...) and a host label that is a key (a tunnel's
// https://<token>.example.io) were shown.
func TestURLFragmentAndHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://app.example/cb#access_token=abc.def&token_type=bearer&expires_in=3600", "https://app.example/cb#access_token=xxxxx&token_type=xxxxx&expires_in=3600"}, // token_type is named for a token,
		{"https://app.example/cb?x=1#id_token=eyJhbGciOi.x.y&state=s", "https://app.example/cb?x=1#id_token=xxxxx&state=s"},
		{"https://host/sk-abc123def456ghi789#frag/sk-notpath", "https://host/xxxxx#frag/sk-notpath"},
		{"https://host/page#section-2", ""},
		{"https://host/page#sk-abc123def456ghi789", "https://host/page#xxxxx"},
		{"https://2kq9x7vmw3tr8bz4lp6yd1.ngrok.io/mcp", "https://xxxxx.ngrok.io/mcp"},
		{"https://8f14e45f-ceea-467f-a0e6-3a9b2c1d0e7f.relay.example/sse", "https://xxxxx.relay.example/sse"},
		{"https://u:pw@2kq9x7vmw3tr8bz4lp6yd1.tunnel.example:8443/mcp", "https://u:xxxxx@xxxxx.tunnel.example:8443/mcp"},
		{"https://user:pass@host/mcp", "https://user:xxxxx@host/mcp"},
		// Ordinary hosts stay.
		{"https://us-central1-aiplatform.googleapis.com/v1/x", ""},
		{"https://ec2-54-123-45-67.compute-1.amazonaws.com:8080/mcp", ""},
		{"https://my-bucket-2024.s3.eu-west-1.amazonaws.com/o", ""},
		{"https://3f2a-81-2-69-160.ngrok-free.app/mcp", ""},
		{"https://abcdefghijklmnopqrst.supabase.co/functions/v1/mcp", ""},
		{"http://[2001:db8::1]:8080/mcp", ""},
		{"http://192.168.10.20:8080/mcp", ""},
	} {
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if got := redact.URL(tc.in); got != want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, want)
		}
	}
}

// TestURLPasswordWithDelimiter: a password with an unescaped '/', '?' or
// '#' (a hand-written https://user:pa#ss@host) ended the authority early,
// so the password was not found and was shown.
func TestURLPasswordWithDelimiter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://user:pa/ss@host/mcp", "https://user:xxxxx@host/mcp"},
		{"https://user:p#ss@host/mcp", "https://user:xxxxx@host/mcp"},
		{"https://user:p?ss@host", "https://user:xxxxx@host"},
		// A port and an '@' in the path: no userinfo.
		{"https://host:8080/users/@me", ""},
		{"https://host:8080/a?next=u@example.com", ""},
		{"https://host/mcp/@scope/pkg", ""},
	} {
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if got := redact.URL(tc.in); got != want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, want)
		}
		for _, s := range redact.Secrets(tc.in) {
			if strings.Contains(want, s) {
				t.Errorf("Secrets(%q) has %q, which URL shows", tc.in, s)
			}
		}
	}
	if got := redact.Secrets("https://user:p#ss@host/mcp"); !slices.Contains(got, "p#ss") {
		t.Errorf("Secrets = %q, want p#ss among them", got)
	}
}

// TestURLCredentialParams: parameters named for a credential are masked
// whatever their value looks like; values that look like keys are masked
// whatever the parameter is called.
func TestURLCredentialParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://h/x?token=a", "https://h/x?token=xxxxx"},
		{"https://h/x?key=a%20b%26c", "https://h/x?key=xxxxx"},
		{"https://h/x?apikey=1&api_key=2&API-KEY=3&ApiKey=4", "https://h/x?apikey=xxxxx&api_key=xxxxx&API-KEY=xxxxx&ApiKey=xxxxx"},
		{"https://h/x?access_token=a==&sig=b&signature=c&password=d&secret=e&auth=f", "https://h/x?access_token=xxxxx&sig=xxxxx&signature=xxxxx&password=xxxxx&secret=xxxxx&auth=xxxxx"},
		{"https://h/x?hapikey=a&private_token=b&authorization=c&pass=d&refresh_token=e", "https://h/x?hapikey=xxxxx&private_token=xxxxx&authorization=xxxxx&pass=xxxxx&refresh_token=xxxxx"},
		{"https://h/x?auth[token]=a&creds[apikey]=b", "https://h/x?auth[token]=xxxxx&creds[apikey]=xxxxx"},
		{"https://h/x?a=1;token=t0k", "https://h/x?a=1;token=xxxxx"},
		{"https://h/x?token=a=b=c&x=1", "https://h/x?token=xxxxx&x=1"},
		{"https://h/x?q=sk-proj-abc123def456ghi789&page=2", "https://h/x?q=xxxxx&page=2"},
		// These stay.
		{"https://h/x?max_tokens=100&tokenizer=bpe&monkey=1&keyboard=2&bypass=3", ""},
		{"https://h/x?q=hello+world&page=2&api-version=2024-10-21", ""},
	} {
		want := tc.want
		if want == "" {
			want = tc.in
		}
		if got := redact.URL(tc.in); got != want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, want)
		}
	}
}

// TestTextLongerSecretFirst: of two secrets one the other's prefix, the
// shorter one was replaced first, leaving the longer one's tail shown.
func TestTextLongerSecretFirst(t *testing.T) {
	t.Parallel()
	raw := "https://tok3n@host/mcp?token=tok3n-extra-tail"
	msg := `Get "https://tok3n@host/mcp?token=tok3n-extra-tail": EOF`
	got := redact.Text(msg, redact.Secrets(raw))
	if strings.Contains(got, "extra-tail") || strings.Contains(got, "tok3n") {
		t.Errorf("Text = %q: part of a secret is shown", got)
	}
}

// TestURLPathParams: a credential in a path segment's parameters (a
// servlet's ;jsessionid=, /x;token=) and a parameter name with a space
// (?api+key=) were shown.
func TestURLPathParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want, secret string }{
		{"https://h/app;jsessionid=1A2B3C4D5E/x?y=1", "https://h/app;jsessionid=xxxxx/x?y=1", "1A2B3C4D5E"},
		{"https://h/x;token=abcd;v=1/y", "https://h/x;token=xxxxx;v=1/y", "abcd"},
		{"https://h/x?api+key=abcd&api%20token=efgh", "https://h/x?api+key=xxxxx&api%20token=xxxxx", "efgh"},
		{"https://h/x;v=1/y;type=a", "https://h/x;v=1/y;type=a", ""},
	} {
		if got := redact.URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := redact.Secrets(tc.in); tc.secret != "" && !slices.Contains(got, tc.secret) || tc.secret == "" && len(got) > 0 {
			t.Errorf("Secrets(%q) = %q, want %q among them", tc.in, got, tc.secret)
		}
	}
}
