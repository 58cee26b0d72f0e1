package main

import (
	"maps"
	"testing"
)

func TestChallengeParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header string
		want   map[string]string
	}{
		{"resource metadata and scope",
			`Bearer resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp", scope="mcp:basic mcp:read"`,
			map[string]string{"resource_metadata": "http://localhost:1/.well-known/oauth-protected-resource/mcp", "scope": "mcp:basic mcp:read"}},
		{"step-up error", `Bearer error="insufficient_scope", scope="mcp:admin"`,
			map[string]string{"error": "insufficient_scope", "scope": "mcp:admin"}},
		{"token value and escaped quote", `Bearer realm=mcp, error_description="say \"hi\", twice"`,
			map[string]string{"realm": "mcp", "error_description": `say "hi", twice`}},
		{"scheme only", `Bearer`, map[string]string{}},
		{"empty", ``, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := challengeParams(tt.header); !maps.Equal(got, tt.want) {
				t.Fatalf("challengeParams(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}
