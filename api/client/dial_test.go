package client

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/pki"
)

// A node whose clock was moved on renews its certificate at its own time: the client verifies it at
// that time only when told how far ahead the node runs.
func TestClockSkew(t *testing.T) {
	now := time.Now()
	ahead := 300 * 24 * time.Hour
	ca, caPEM := testCA(t, now.Add(-time.Hour))
	server, err := ca.Sign(pki.Request{CommonName: "node", DNSNames: []string{ServerName}, Server: true}, now.Add(ahead))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ca.Sign(pki.Request{CommonName: "admin", Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.X509KeyPair(server.Cert, server.Key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &Context{CA: string(caPEM.Cert), Cert: string(admin.Cert), Key: string(admin.Key)}

	for _, tc := range []struct {
		skew    time.Duration
		wantErr string
	}{
		{0, "certificate has expired or is not yet valid"},
		{ahead, ""},
	} {
		cfg, err := Options{Context: ctx, ClockSkew: tc.skew}.tlsConfig()
		if err != nil {
			t.Fatal(err)
		}
		l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if s, err := l.Accept(); err == nil {
				s.(*tls.Conn).Handshake()
				s.Close()
			}
		}()
		c, err := net.DialTimeout("tcp", l.Addr().String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		err = tls.Client(c, cfg).Handshake()
		c.Close()
		l.Close()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ClockSkew %v: handshake: %v", tc.skew, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ClockSkew %v: handshake error = %v, want %q", tc.skew, err, tc.wantErr)
		}
	}
}

// testCA is a machine CA valid from now.
func testCA(t *testing.T, now time.Time) (pki.KeyPair, pki.PEM) {
	t.Helper()
	caPEM, err := pki.NewCA("machine CA", now)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCert(caPEM.Cert)
	if err != nil {
		t.Fatal(err)
	}
	key, err := pki.ParseKey(caPEM.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pki.KeyPair{Cert: cert, Key: key}, caPEM
}

// A client certificate that has expired at the node's time is refused before dialing, naming it and
// what to do, instead of the node's bare TLS alert.
func TestClientCertificateExpired(t *testing.T) {
	now := time.Now()
	ca, caPEM := testCA(t, now.Add(-3*365*24*time.Hour))
	for _, tc := range []struct {
		name     string
		issued   time.Time
		skew     time.Duration
		wantErrs []string // empty: accepted
	}{
		{"valid", now, 0, nil},
		{"expired at this host's clock", now.Add(-400 * 24 * time.Hour), 0, []string{"client certificate (admin) expired on", "at this host's clock", "cairnctl gen cairnconfig"}},
		{"valid here, expired at the node's clock", now, 400 * 24 * time.Hour, []string{"expired on", "at the node's clock (--clock-skew)"}},
		{"valid at the node's clock, 300 days on", now, 300 * 24 * time.Hour, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin, err := ca.Sign(pki.Request{CommonName: "admin", Client: true}, tc.issued)
			if err != nil {
				t.Fatal(err)
			}
			ctx := &Context{CA: string(caPEM.Cert), Cert: string(admin.Cert), Key: string(admin.Key)}
			_, err = Options{Context: ctx, ClockSkew: tc.skew}.tlsConfig()
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Errorf("tlsConfig() = %v, want no error", err)
				}
				return
			}
			for _, want := range tc.wantErrs {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("tlsConfig() = %v, want an error with %q", err, want)
				}
			}
		})
	}
}
