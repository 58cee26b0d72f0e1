package jobs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNATSConfigNamesMissingFiles: a credentials, CA, certificate or key
// file that cannot be read is reported under its variable's name.
func TestNATSConfigNamesMissingFiles(t *testing.T) {
	t.Parallel()
	readable := filepath.Join(t.TempDir(), "present.pem")
	if err := os.WriteFile(readable, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		variable string
		cfg      NATSConfig
	}{
		{"NATS_CREDS", NATSConfig{Creds: missing}},
		{"NATS_CA", NATSConfig{CA: missing}},
		{"NATS_CERT", NATSConfig{Cert: missing, Key: readable}},
		{"NATS_KEY", NATSConfig{Cert: readable, Key: missing}},
	} {
		tc.cfg.URL = "nats://127.0.0.1:1" // never reached
		nc, err := tc.cfg.Connect("test")
		if err == nil {
			nc.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.variable+"="+missing+": open") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v", tc.variable, err)
		}
	}
	if err := (NATSConfig{CA: readable, Cert: readable, Key: readable, Creds: readable}).checkFiles(); err != nil {
		t.Errorf("readable files: %v", err)
	}
}
