package toolcache

import (
	"fmt"
	"strings"
	"testing"
)

func TestToolHintsOverrideTheServers(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	sc := ServerConfig{Command: "x", ToolHints: map[string]Annotations{
		"get_*":     {ReadOnlyHint: &yes},
		"*":         {IdempotentHint: &no},
		"get_mail":  {ReadOnlyHint: &no},
		"put_thing": {IdempotentHint: &yes},
	}}
	if err := sc.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name           string
		server         Annotations
		readOnly, idem *bool
	}{
		{"get_file", Annotations{}, &yes, &no},
		{"get_mail", Annotations{ReadOnlyHint: &yes}, &no, &no}, // the exact name wins over get_*
		{"put_thing", Annotations{IdempotentHint: &no}, nil, &yes},
		{"other", Annotations{ReadOnlyHint: &yes}, &yes, &no}, // fields not named keep the server's
	} {
		got := sc.hints(tc.name, tc.server)
		if !sameBool(got.ReadOnlyHint, tc.readOnly) || !sameBool(got.IdempotentHint, tc.idem) {
			t.Errorf("%s: readOnly %v idempotent %v", tc.name, show(got.ReadOnlyHint), show(got.IdempotentHint))
		}
	}
	bad := ServerConfig{Command: "x", ToolHints: map[string]Annotations{"[": {}}}
	if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "toolHints") {
		t.Errorf("bad glob: %v", err)
	}
	// Of several bad globs the error names the same one each time.
	bad.ToolHints = map[string]Annotations{"[a": {}, "[b": {}, "[c": {}, "[d": {}, "ok": {}}
	first := fmt.Sprint(bad.validate())
	for range 20 {
		if got := fmt.Sprint(bad.validate()); got != first {
			t.Fatalf("error varies: %q, then %q", first, got)
		}
	}
}

func sameBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
