package main

import (
	"strings"
	"testing"
)

// TestModelHidesBaseURLCredentials: the demo printed OPENAI_BASE_URL as it
// was, a gateway's key in its userinfo, path or query with it.
func TestModelHidesBaseURLCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base, secret, want string
	}{
		{"https://gw.example/v1/sk-abc123def456ghi789/", "sk-abc123def456ghi789", "https://gw.example/v1/xxxxx/"},
		{"https://u:pAss123@gw.example/v1", "pAss123", "https://u:xxxxx@gw.example/v1"},
		{"https://gw.example/v1?api_key=k3y-0001", "k3y-0001", "https://gw.example/v1?api_key=xxxxx"},
		{"https://api.openai.com/v1", "", "https://api.openai.com/v1"},
	} {
		env := map[string]string{"OPENAI_BASE_URL": tc.base, "OPENAI_MODEL": "m"}
		var out strings.Builder
		_, closeFn, err := model(&out, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		closeFn()
		if tc.secret != "" && strings.Contains(out.String(), tc.secret) {
			t.Errorf("%s: output shows the secret: %q", tc.base, out.String())
		}
		if want := "demo: model m at " + tc.want + "\n"; out.String() != want {
			t.Errorf("%s: output %q, want %q", tc.base, out.String(), want)
		}
	}
}
