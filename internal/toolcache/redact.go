package toolcache

import (
	"encoding/base64"
	"errors"
	"net/url"
	"strings"

	"github.com/jetagent/jetagent/internal/redact"
)

// splitUserinfo takes the userinfo out of an http(s) server's URL and
// sends it as the Basic authorization net/http would have made of it
// (unless headers set Authorization, which net/http would then send
// instead). Left in the URL, it would be quoted by the transports' errors
// (net/http hides only a password), which reach the status, the log and
// the model.
func splitUserinfo(raw string, headers map[string]string) (string, map[string]string) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw, headers
	}
	pass, _ := u.User.Password()
	auth := u.User.Username() + ":" + pass
	u.User = nil
	out := make(map[string]string, len(headers)+1)
	has := false
	for k, v := range headers {
		out[k] = v
		has = has || strings.EqualFold(k, "Authorization")
	}
	if !has {
		out["Authorization"] = "Basic " + base64.StdEncoding.EncodeToString([]byte(auth))
	}
	return u.String(), out
}

// urlError is a transport constructor's error for raw, which quotes the
// URL whole when it does not parse: the cause, with raw redacted.
func urlError(raw string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: redact.URL(raw), Err: ue.Err}
	}
	return err
}
