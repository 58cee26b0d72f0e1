package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestEmbeddedAuthentication: the embedded server demands the credentials
// it is configured with from network clients (the NATS_* variables a
// client reads), while the worker's in-process connection still works with
// the user/token alone (no TLS in process).
func TestEmbeddedAuthentication(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	const tlsRefused = "certificate required|connection closed by remote after tls handshake|tls: "
	tests := []struct {
		name     string
		cfg      EmbeddedConfig
		right    NATSConfig
		refused  []NATSConfig
		errTexts []string
	}{
		{
			name:     "user and password",
			cfg:      EmbeddedConfig{User: "agent", Password: "s3cret"},
			right:    NATSConfig{User: "agent", Password: "s3cret"},
			refused:  []NATSConfig{{}, {User: "agent", Password: "guess"}},
			errTexts: []string{"authorization violation", "authorization violation"},
		},
		{
			name:     "token",
			cfg:      EmbeddedConfig{Token: "t0ken"},
			right:    NATSConfig{Token: "t0ken"},
			refused:  []NATSConfig{{}, {Token: "other"}},
			errTexts: []string{"authorization violation", "authorization violation"},
		},
		{
			name:    "mutual TLS",
			cfg:     EmbeddedConfig{Cert: pki.serverCert, Key: pki.serverKey, ClientCA: pki.ca},
			right:   NATSConfig{CA: pki.ca, Cert: pki.clientCert, Key: pki.clientKey},
			refused: []NATSConfig{{CA: pki.ca}, {CA: pki.ca, Cert: pki.strangerCert, Key: pki.strangerKey}},
			// Without a client certificate the handshake fails; without
			// TLS at all the client upgrades (the server requires it).
			errTexts: []string{tlsRefused, tlsRefused},
		},
		{
			name:     "TLS and a token",
			cfg:      EmbeddedConfig{Cert: pki.serverCert, Key: pki.serverKey, Token: "t0ken"},
			right:    NATSConfig{CA: pki.ca, Token: "t0ken"},
			refused:  []NATSConfig{{CA: pki.ca}, {Token: "t0ken", CA: pki.strangerCA}},
			errTexts: []string{"authorization violation", "certificate signed by unknown authority"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:0"
			s, err := StartEmbedded(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })

			// The worker's own connection: in process, credentials only.
			in, err := ConnectEmbedded(s, cfg, "jetagent-worker")
			if err != nil {
				t.Fatalf("in-process connection: %v", err)
			}
			defer in.Close()
			js, err := jetstream.New(in)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := EnsureTopology(natstest.Context(t), js, TopologyConfig{}, nil); err != nil {
				t.Fatalf("topology over the in-process connection: %v", err)
			}

			right := tt.right
			right.URL = s.ClientURL()
			nc, err := right.Connect("jetagent-test")
			if err != nil {
				t.Fatalf("right credentials refused: %v", err)
			}
			defer nc.Close()
			if _, err := NewClient(natstest.Context(t), nc, ClientConfig{}); err != nil {
				t.Fatalf("client over the network connection: %v", err)
			}
			for i, bad := range tt.refused {
				bad.URL = s.ClientURL()
				nc, err := bad.Connect("jetagent-test")
				if err == nil {
					nc.Close()
					t.Fatalf("%+v connected", bad)
				}
				if !containsAny(strings.ToLower(err.Error()), tt.errTexts[i]) {
					t.Errorf("%+v: %v, want %q", bad, err, tt.errTexts[i])
				}
			}
		})
	}
}

// TestEmbeddedRefusesOpenListen: listening beyond loopback without any
// authentication would hand the queue to the network.
func TestEmbeddedRefusesOpenListen(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "example.com:0"} {
		_, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: listen})
		if !errors.Is(err, ErrOpenListen) {
			t.Errorf("%s without authentication: %v, want ErrOpenListen", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0", "127.1.2.3:0"} {
		if !LoopbackListen(listen) {
			t.Errorf("%s is loopback", listen)
		}
	}
	// With authentication it starts (on every interface, for a moment).
	s, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: "0.0.0.0:0", Token: "t0ken"})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
}

// TestEmbeddedRefusesBadAuthConfig: settings that authenticate nobody, or
// half a TLS setup, are refused before a server starts. A user without a
// password used to start a server any client giving the name could enter,
// also beyond loopback (Open counted the user as authentication).
func TestEmbeddedRefusesBadAuthConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		cfg    EmbeddedConfig
		want   string
		open   bool // what Open says of it
		listen string
	}{
		{"user without a password", EmbeddedConfig{User: "agent"}, `user "agent" has no password`, true, "127.0.0.1:0"},
		{"user without a password, beyond loopback", EmbeddedConfig{User: "agent"}, `user "agent" has no password`, true, "0.0.0.0:0"},
		{"password without a user", EmbeddedConfig{Password: "s3cret"}, "a password needs a user", true, "127.0.0.1:0"},
		{"token and user", EmbeddedConfig{Token: "t", User: "agent", Password: "p"}, "a token and a user/password are exclusive", false, "127.0.0.1:0"},
		{"certificate without key", EmbeddedConfig{Cert: "c.pem"}, "a TLS certificate and key go together", true, "127.0.0.1:0"},
		{"client CA without certificate", EmbeddedConfig{ClientCA: "ca.pem"}, "needs the server's own certificate and key", true, "127.0.0.1:0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.cfg.Open(); got != tt.open {
				t.Errorf("Open() = %v, want %v", got, tt.open)
			}
			if err := tt.cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want ErrConfig with %q", err, tt.want)
			}
			cfg := tt.cfg
			cfg.DataDir, cfg.Listen = t.TempDir(), tt.listen
			s, err := StartEmbedded(cfg)
			if err == nil {
				s.Shutdown()
				s.WaitForShutdown()
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("StartEmbedded: %v, want ErrConfig with %q", err, tt.want)
			}
		})
	}
	// With its password the user authenticates: Open is false, and the
	// server starts beyond loopback.
	cfg := EmbeddedConfig{User: "agent", Password: "s3cret", DataDir: t.TempDir(), Listen: "0.0.0.0:0"}
	if cfg.Open() || cfg.Validate() != nil {
		t.Fatalf("user and password: Open %v, Validate %v", cfg.Open(), cfg.Validate())
	}
	s, err := StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
}
