package llm_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A base URL's userinfo (a proxy's user:key@, or a token@) is in none of
// the client's errors, which become the job's error (its state, events and
// the worker's log), nor in a config error, printed at the worker's start.
func TestBaseURLCredentialsStayOutOfErrors(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, llmtest.Reply{Content: "ok"})
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close() // connections are refused
	withInfo := func(base, userinfo string) string {
		return strings.Replace(base, "http://", "http://"+userinfo+"@", 1)
	}
	for _, userinfo := range []string{"user:pw-s3cret", "tok3n-s3cret"} {
		for _, base := range []string{
			withInfo(strings.TrimSuffix(s.URL(), "/v1"), userinfo), // 404, with the hint that quotes the base URL
			withInfo(deadURL, userinfo) + "/v1",                    // refused
		} {
			c, err := llm.New(llm.Config{BaseURL: base, APIKey: "sk-test", Model: "m", MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Complete(testCtx(t), userRequest())
			if err == nil || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: error %v, want one without the credentials", base, err)
			}
		}
		for _, bad := range []string{"http://" + userinfo + "@host:x/v1", "http://" + userinfo + "@host/v1?q", "ftp://" + userinfo + "@host/v1"} {
			if err := (llm.Config{BaseURL: bad, Model: "m"}).Validate(); err == nil || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: config error %v, want one without the credentials", bad, err)
			}
		}
	}
}
