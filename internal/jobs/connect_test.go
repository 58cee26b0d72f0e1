package jobs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestNATSConfigConnect connects through NATSConfig to real servers that
// demand each supported kind of authentication: the right credentials
// connect and can build the topology, wrong ones fail naming the cause.
func TestNATSConfigConnect(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	op := newTestOperator(t)
	missing := filepath.Join(t.TempDir(), "missing")
	const tlsRefused = "certificate required|connection closed by remote after tls handshake"

	type attempt struct {
		name string
		cfg  NATSConfig
		// errText is empty for success, else words the error must contain
		// (lower case; "|" separates alternatives); errIs, when set, is an
		// error it must wrap.
		errIs   error
		errText string
	}
	tests := []struct {
		name     string
		server   func(*server.Options)
		attempts []attempt
	}{
		{
			name:   "user and password",
			server: func(o *server.Options) { o.Username, o.Password = "agent", "s3cret" },
			attempts: []attempt{
				{name: "right", cfg: NATSConfig{User: "agent", Password: "s3cret"}},
				{name: "wrong password", cfg: NATSConfig{User: "agent", Password: "guess"},
					errIs: nats.ErrAuthorization, errText: "authorization violation"},
				{name: "none", errIs: nats.ErrAuthorization, errText: "authorization violation"},
			},
		},
		{
			name:   "token",
			server: func(o *server.Options) { o.Authorization = "t0ken" },
			attempts: []attempt{
				{name: "right", cfg: NATSConfig{Token: "t0ken"}},
				{name: "wrong", cfg: NATSConfig{Token: "other"},
					errIs: nats.ErrAuthorization, errText: "authorization violation"},
				{name: "user instead", cfg: NATSConfig{User: "t0ken"},
					errIs: nats.ErrAuthorization, errText: "authorization violation"},
			},
		},
		{
			name:   "creds file",
			server: op.configure,
			attempts: []attempt{
				{name: "right", cfg: NATSConfig{Creds: op.creds}},
				{name: "untrusted account", cfg: NATSConfig{Creds: op.foreignCreds},
					errIs: nats.ErrAuthorization, errText: "authorization violation"},
				{name: "missing file", cfg: NATSConfig{Creds: missing},
					errIs: os.ErrNotExist, errText: "no such file"},
			},
		},
		{
			name: "mutual TLS",
			server: func(o *server.Options) {
				tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
					CertFile: pki.serverCert, KeyFile: pki.serverKey, CaFile: pki.ca, Verify: true,
				})
				if err != nil {
					t.Fatal(err)
				}
				o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = tc, true, true, 10
			},
			attempts: []attempt{
				{name: "right", cfg: NATSConfig{CA: pki.ca, Cert: pki.clientCert, Key: pki.clientKey}},
				// The server's refusal reaches the client as an alert, or,
				// when the server has already hung up, as the closed
				// connection: TLS 1.3 ends the client's handshake first.
				{name: "no client certificate", cfg: NATSConfig{CA: pki.ca}, errText: tlsRefused},
				// Go's TLS client offers only a certificate the server's CA
				// list accepts, so the server sees none.
				{name: "client certificate of another CA", cfg: NATSConfig{CA: pki.ca, Cert: pki.strangerCert, Key: pki.strangerKey},
					errText: tlsRefused},
				{name: "server not trusted", cfg: NATSConfig{CA: pki.strangerCA, Cert: pki.clientCert, Key: pki.clientKey},
					errText: "certificate signed by unknown authority"},
				// Without NATS_CA the client still upgrades to TLS (the
				// server requires it) and checks the server against the
				// system roots.
				{name: "no CA", cfg: NATSConfig{Cert: pki.clientCert, Key: pki.clientKey},
					errText: "certificate signed by unknown authority"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startConfiguredServer(t, tt.server)
			for _, a := range tt.attempts {
				t.Run(a.name, func(t *testing.T) {
					t.Parallel()
					cfg := a.cfg
					cfg.URL = s.ClientURL()
					nc, err := cfg.Connect("jetagent-test")
					if a.errText != "" {
						if err == nil {
							nc.Close()
							t.Fatal("connected with wrong credentials")
						}
						if !strings.HasPrefix(err.Error(), "connect to NATS at "+cfg.URL+": ") ||
							!containsAny(strings.ToLower(err.Error()), a.errText) || (a.errIs != nil && !errors.Is(err, a.errIs)) {
							t.Fatalf("error %q, want one naming the URL and %q (is %v)", err, a.errText, a.errIs)
						}
						t.Logf("refused: %v", err)
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					defer nc.Close()
					js, err := jetstream.New(nc)
					if err != nil {
						t.Fatal(err)
					}
					topo, err := EnsureTopology(natstest.Context(t), js, TopologyConfig{}, nil)
					if err != nil {
						t.Fatalf("topology over %s: %v", tt.name, err)
					}
					if _, err := topo.JS.Publish(natstest.Context(t), "agent.jobs.default", []byte(`{"task":"x"}`)); err != nil {
						t.Fatal(err)
					}
					if cfg.CA != "" {
						if st, err := nc.TLSConnectionState(); err != nil || len(st.PeerCertificates) == 0 {
							t.Fatalf("not over TLS: %v", err)
						}
					}
				})
			}
		})
	}
}

func TestNATSConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  NATSConfig
		want string
	}{
		{"token and user", NATSConfig{Token: "t", User: "u"}, "NATS_TOKEN and NATS_USER/NATS_PASSWORD are exclusive"},
		{"password alone", NATSConfig{Password: "p"}, "NATS_PASSWORD is set but NATS_USER is not"},
		{"cert without key", NATSConfig{Cert: "c.pem"}, "NATS_CERT and NATS_KEY must be set together"},
		{"key without cert", NATSConfig{Key: "k.pem"}, "NATS_CERT and NATS_KEY must be set together"},
		// nats.go dials any other scheme as nats: a typo connected, or was
		// retried for ever as unreachable.
		{"scheme typo", NATSConfig{URL: "htp://127.0.0.1:1"}, `NATS_URL "htp://127.0.0.1:1": scheme "htp" is not nats, tls, ws or wss`},
		{"http", NATSConfig{URL: "nats://127.0.0.1:1, http://127.0.0.1:1"}, `scheme "http" is not nats, tls, ws or wss`},
		{"credentials not shown", NATSConfig{URL: "htps://me:s3cr3tpass@127.0.0.1:1"}, `NATS_URL "htps://me:xxxxx@127.0.0.1:1"`},
		{"port out of range", NATSConfig{URL: "127.0.0.1:99999"}, `NATS_URL "127.0.0.1:99999": port 99999 is not between 1 and 65535`},
		{"port zero", NATSConfig{URL: "nats://127.0.0.1:0"}, "port 0 is not between 1 and 65535"},
		{"commas alone", NATSConfig{URL: " , ,"}, `NATS_URL " , ," holds no URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Refused before dialing: the URL points nowhere.
			if tt.cfg.URL == "" {
				tt.cfg.URL = "nats://127.0.0.1:1"
			}
			_, err := tt.cfg.Connect("x")
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// startConfiguredServer runs a JetStream server on a random local port
// with the options StartEmbedded uses, changed by configure.
func startConfiguredServer(t *testing.T, configure func(*server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true,
	}
	configure(o)
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(waitTimeout) {
		t.Fatal("server not ready")
	}
	return s
}

// testPKI holds PEM files: a CA with a server and a client certificate,
// and a second, untrusted CA with a client certificate of its own.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	strangerCA, strangerCert, strangerKey            string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{}
	ca, caKey := newCA(t, dir, "ca", &p.ca)
	issue(t, dir, "server", ca, caKey, true, &p.serverCert, &p.serverKey)
	issue(t, dir, "client", ca, caKey, false, &p.clientCert, &p.clientKey)
	other, otherKey := newCA(t, dir, "stranger-ca", &p.strangerCA)
	issue(t, dir, "stranger", other, otherKey, false, &p.strangerCert, &p.strangerKey)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func certTemplate(t *testing.T, cn string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
}

func newCA(t *testing.T, dir, name string, certPath *string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl := certTemplate(t, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	*certPath = writePEM(t, dir, name+".pem", "CERTIFICATE", der)
	return cert, key
}

func issue(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, isServer bool, certPath, keyPath *string) {
	t.Helper()
	key := newKey(t)
	tmpl := certTemplate(t, name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if isServer {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	*certPath = writePEM(t, dir, name+".pem", "CERTIFICATE", der)
	*keyPath = writePEM(t, dir, name+"-key.pem", "PRIVATE KEY", keyDER)
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testOperator is decentralized (JWT) authentication as an operator sets
// it up with nsc: an operator, a system account, an application account
// with JetStream, and a user of it in a .creds file; foreignCreds is a
// user of an account the server does not trust.
type testOperator struct {
	claims              *jwt.OperatorClaims
	sysPub              string
	resolver            *server.MemAccResolver
	creds, foreignCreds string
}

func newTestOperator(t *testing.T) *testOperator {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	opKP, err := nkeys.CreateOperator()
	must(err)
	opPub, err := opKP.PublicKey()
	must(err)
	o := &testOperator{}

	account := func(signer nkeys.KeyPair, name string, jetStream bool) (nkeys.KeyPair, string, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, err := kp.PublicKey()
		must(err)
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if jetStream {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := ac.Encode(signer)
		must(err)
		return kp, pub, tok
	}
	userCreds := func(accKP nkeys.KeyPair, file string) string {
		ukp, err := nkeys.CreateUser()
		must(err)
		upub, err := ukp.PublicKey()
		must(err)
		uc := jwt.NewUserClaims(upub)
		uc.Name = "worker"
		tok, err := uc.Encode(accKP)
		must(err)
		seed, err := ukp.Seed()
		must(err)
		b, err := jwt.FormatUserConfig(tok, seed)
		must(err)
		path := filepath.Join(t.TempDir(), file)
		must(os.WriteFile(path, b, 0o600))
		return path
	}

	o.resolver = &server.MemAccResolver{}
	_, sysPub, sysJWT := account(opKP, "SYS", false)
	must(o.resolver.Store(sysPub, sysJWT))
	o.sysPub = sysPub
	appKP, appPub, appJWT := account(opKP, "APP", true)
	must(o.resolver.Store(appPub, appJWT))
	o.creds = userCreds(appKP, "worker.creds")

	// The same shape under an operator the server does not know.
	strangerKP, err := nkeys.CreateOperator()
	must(err)
	foreignKP, _, _ := account(strangerKP, "APP", true)
	o.foreignCreds = userCreds(foreignKP, "foreign.creds")

	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "jetagent-test"
	oc.SystemAccount = o.sysPub
	tok, err := oc.Encode(opKP)
	must(err)
	o.claims, err = jwt.DecodeOperatorClaims(tok)
	must(err)
	return o
}

// configure puts the server in operator mode with the accounts preloaded.
func (o *testOperator) configure(opts *server.Options) {
	opts.TrustedOperators = []*jwt.OperatorClaims{o.claims}
	opts.AccountResolver = o.resolver
	opts.SystemAccount = o.sysPub
}

func containsAny(s, alternatives string) bool {
	for alt := range strings.SplitSeq(alternatives, "|") {
		if strings.Contains(s, alt) {
			return true
		}
	}
	return false
}
