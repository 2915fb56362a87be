package server

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/pki"
)

// Credentials hold the API's TLS identity and switch it from maintenance (a self-signed certificate made
// at boot, the bootstrap token on every call) to mutual TLS (the node's certificate from the machine CA,
// client certificates verified against it) without restarting the listener.
type Credentials struct {
	mu sync.RWMutex
	// decided is false until the node has read its lock: until then no call is served, so a locked node
	// never answers a bootstrap token, not even for the moment between starting the listener and booting.
	decided     bool
	maintenance tls.Certificate
	fingerprint string
	node        *tls.Certificate
	clientCAs   *x509.CertPool
	// stuck is why the node will not decide: its boot failed before it could read its lock.
	stuck string
}

// Stuck records why the node cannot read its lock (an encrypted STATE its TPM will not open): every
// call is refused with that reason, since without the lock the node knows neither its mode nor its CA.
func (c *Credentials) Stuck(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stuck = reason
}

// undecided is the refusal of a call before the node has chosen its mode.
func (c *Credentials) undecided() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.stuck != "" {
		return status.Error(codes.FailedPrecondition, "the node cannot read its lock, so it serves no call: "+c.stuck)
	}
	return status.Error(codes.Unavailable, "the node is booting; try again in a moment")
}

// NewCredentials makes the boot-time self-signed certificate for the given names and addresses.
func NewCredentials(hostname string, ips []net.IP, now time.Time) (*Credentials, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	// Self-signed: the certificate is its own CA, and users pin its fingerprint.
	self := pki.KeyPair{Key: key}
	req := pki.Request{CommonName: "cairn-maintenance " + hostname, Server: true,
		DNSNames: []string{client.ServerName, "localhost"}, IPs: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...)}
	if hostname != "" {
		req.DNSNames = append(req.DNSNames, hostname)
	}
	der, err := self.SelfSign(req, now)
	if err != nil {
		return nil, err
	}
	return &Credentials{
		maintenance: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		fingerprint: pki.Fingerprint(der),
	}, nil
}

// Fingerprint is the SHA-256 of the maintenance certificate, printed on the console for users to pin.
func (c *Credentials) Fingerprint() string { return c.fingerprint }

// UseMaintenance serves the self-signed certificate and accepts the bootstrap token.
func (c *Credentials) UseMaintenance() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.node, c.clientCAs, c.decided = nil, nil, true
}

// UseMutualTLS serves the node's certificate and verifies client certificates against the machine CA.
func (c *Credentials) UseMutualTLS(cert tls.Certificate, clientCAs *x509.CertPool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.node, c.clientCAs, c.decided = &cert, clientCAs, true
}

// Decided reports whether the node has chosen its mode yet.
func (c *Credentials) Decided() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.decided
}

// MutualTLS reports the mode.
func (c *Credentials) MutualTLS() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.node != nil
}

// TLSConfig is the listener's config; each handshake picks the mode in force at that moment.
func (c *Credentials) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c.mu.RLock()
			defer c.mu.RUnlock()
			if c.node == nil {
				return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{c.maintenance}, NextProtos: []string{"h2"}}, nil
			}
			// A client without a certificate still completes the handshake, so the health service answers
			// and a token-only caller gets a clear Unauthenticated instead of a bare TLS alert. A
			// certificate from another CA fails the handshake.
			return &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: []tls.Certificate{*c.node},
				ClientAuth:   tls.VerifyClientCertIfGiven,
				ClientCAs:    c.clientCAs,
				NextProtos:   []string{"h2"},
			}, nil
		},
	}
}
