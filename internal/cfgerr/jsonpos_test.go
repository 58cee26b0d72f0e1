package cfgerr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/cfgerr"
)

func TestJSONPosition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data, want string
	}{
		{"trailing comma", "{\n  \"a\": 1,\n}\n", "line 3, column 1"},
		{"first byte", "x", "line 1, column 1"},
		{"unexpected end", "{\"a\": [1,\n2", "line 2, column 1"},
		{"columns count characters", "{\"é\": 1 \"b\": 2}", "line 1, column 9"},
		{"CRLF lines", "{\r\n\"a\": 1,\r\n}", "line 3, column 1"},
	} {
		var v any
		err := json.Unmarshal([]byte(tc.data), &v)
		if err == nil {
			t.Fatalf("%s: %q parsed", tc.name, tc.data)
		}
		wrapped := fmt.Errorf("config: %w", err)
		got, ok := cfgerr.JSONPosition(wrapped, []byte(tc.data))
		if !ok || got != tc.want {
			t.Errorf("%s: JSONPosition = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := cfgerr.JSONPosition(errors.New("other"), []byte("{")); ok {
		t.Error("JSONPosition found a position in an error without a syntax error")
	}
}

func TestInJSONFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mcp.json")
	data := "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\"},\n}}"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var v any
	err := fmt.Errorf("not valid JSON: %w", json.Unmarshal([]byte(data), &v))
	got := cfgerr.InJSONFile(err, path)
	if want := "(at line 3, column 1)"; !strings.HasSuffix(got.Error(), want) {
		t.Errorf("InJSONFile = %q, want it to end %q", got, want)
	}
	var se *json.SyntaxError
	if !errors.As(got, &se) {
		t.Error("the syntax error is no longer in the chain")
	}
	other := errors.New(`server "a": unknown key`)
	if got := cfgerr.InJSONFile(other, path); got != other { //nolint:errorlint // returned as it is, not wrapped
		t.Errorf("InJSONFile changed an error without a syntax error: %q", got)
	}
	if got := cfgerr.InJSONFile(err, filepath.Join(t.TempDir(), "gone.json")); got != err { //nolint:errorlint // returned as it is
		t.Errorf("InJSONFile of an unreadable file: %q", got)
	}
	// A file saved "UTF-8 with BOM": its loader (toolcache.LoadConfig)
	// reads the mark as three spaces, and an editor does not count it.
	bom := filepath.Join(t.TempDir(), "bom.json")
	data = `{"mcpServers": {"a": {"command": "x"},}}`
	if err := os.WriteFile(bom, []byte("\ufeff"+data), 0o600); err != nil {
		t.Fatal(err)
	}
	err = fmt.Errorf("not valid JSON: %w", json.Unmarshal([]byte("   "+data), &v))
	if got, want := cfgerr.InJSONFile(err, bom).Error(), "(at line 1, column 39)"; !strings.HasSuffix(got, want) {
		t.Errorf("InJSONFile of a file with a byte order mark = %q, want it to end %q", got, want)
	}
}
