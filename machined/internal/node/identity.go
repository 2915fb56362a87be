package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/atomicfile"
	"github.com/cairn-os/cairn/machined/internal/certs"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
)

// Files of the node's machine-API identity, under STATE/pki.
const (
	identityKey  = "machine.key"
	identityCert = "machine.crt"
	identityCA   = "machine-ca.crt"
)

// loadIdentity reads the node's key from STATE, or makes a new one in memory; storeIdentity writes it once
// the node is locked, so an unconfigured node leaves nothing behind. A node given no hostname is named
// after its key, so the name stays the same across reboots once the key is stored.
func (n *Node) loadIdentity(state string) error {
	if err := n.readIdentity(state); err != nil {
		return err
	}
	n.mu.Lock()
	name, key := n.hostname, n.identity
	n.mu.Unlock()
	if name == "" {
		der, _ := x509.MarshalPKIXPublicKey(key.Public())
		sum := sha256.Sum256(der)
		name = "cairn-" + hex.EncodeToString(sum[:3])
	}
	n.setHostname(name)
	return nil
}

func (n *Node) readIdentity(state string) error {
	data, err := os.ReadFile(filepath.Join(state, "pki", identityKey))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k, err := pki.NewKey()
		if err != nil {
			return err
		}
		n.mu.Lock()
		n.identity = k
		n.mu.Unlock()
		return nil
	case err != nil:
		return fmt.Errorf("read node identity: %w", err)
	}
	k, err := pki.ParseKey(data)
	if err != nil {
		return fmt.Errorf("node identity %s: %w", filepath.Join(state, "pki", identityKey), err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("node identity %s is not an ECDSA key", filepath.Join(state, "pki", identityKey))
	}
	n.mu.Lock()
	n.identity = ek
	n.mu.Unlock()
	return nil
}

func (n *Node) storeIdentity(context.Context) error {
	n.mu.Lock()
	k, dir := n.identity, n.stateDir
	n.mu.Unlock()
	data, err := pki.EncodeKey(k)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, "pki", identityKey), data, 0o600)
}

// issueCertificate signs the node's machine-API certificate from the machine CA (control-plane Init).
func (n *Node) issueCertificate(context.Context) error {
	m := n.Machine()
	ca, err := (pki.PEM{Cert: []byte(m.Cluster.Secrets.MachineCA.Cert), Key: []byte(m.Cluster.Secrets.MachineCA.Key)}).ParseCA()
	if err != nil {
		return fmt.Errorf("cluster.secrets.machineCA: %w", err)
	}
	n.mu.Lock()
	key, host := n.identity, n.hostname
	n.mu.Unlock()
	req := n.certRequest(host, m.Machine.CertSANs)
	der, err := ca.SignPublic(req, key.Public(), n.o.Now())
	if err != nil {
		return err
	}
	return n.writeCertificate(pki.EncodeCert(der), []byte(m.Cluster.MachineCA))
}

// renewCertificate re-issues the node's machine-API certificate at boot once less than a third of its
// life is left, like the Kubernetes certificates. A control plane holds the machine CA's key and signs it
// itself; a joined worker asks a control plane's join service (renewJoined).
func (n *Node) renewCertificate(ctx context.Context) error {
	m := n.Machine()
	if m == nil {
		return nil
	}
	path := filepath.Join(n.StateDir(), "pki", identityCert)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read the machine-API certificate: %w", err)
	}
	c, err := certs.Parse(path, data)
	if err == nil && !c.Due(n.o.Now()) {
		return nil
	}
	n.o.Log.Info("renewing the machine-API certificate", "expires", c.NotAfter, "unreadable", err)
	if m.Cluster.Secrets != nil && m.Cluster.Secrets.MachineCA.Key != "" {
		return n.issueCertificate(ctx)
	}
	if err := n.renewJoined(ctx, data); err != nil {
		// The certificate still works until it expires; the next boot asks again.
		n.o.Log.Warn("machine-API certificate not renewed", "error", err, "expires", c.NotAfter)
		n.o.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: events.Failed, Error: err.Error(),
			Message: "the machine-API certificate was not renewed; the next boot asks again"})
	}
	return nil
}

// renewJoined asks the control planes' join services, in turn, to renew a joined node's certificate.
func (n *Node) renewJoined(ctx context.Context, current []byte) error {
	if n.o.Renewer == nil {
		return errors.New("no join client to ask a control plane with")
	}
	caPEM, err := os.ReadFile(filepath.Join(n.StateDir(), "pki", identityCA))
	if err != nil {
		return fmt.Errorf("read the machine CA: %w", err)
	}
	n.mu.Lock()
	key := n.identity
	n.mu.Unlock()
	var errs []error
	for _, addr := range n.joinServices() {
		req, err := joinsvc.NewRenewRequest(current, key, n.o.Now())
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, 15*time.Second) // a control plane that is down must not hold the boot
		cert, err := n.o.Renewer.RenewCertificate(actx, addr, caPEM, req)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		n.o.Log.Info("machine-API certificate renewed by a control plane", "join", addr)
		return n.writeCertificate(cert, caPEM)
	}
	if len(errs) == 0 {
		return errors.New("no control plane's join service is known to this node")
	}
	return errors.Join(errs...)
}

// joinServices lists where a joined node finds join services: its config's, then the control planes its
// ticket named.
func (n *Node) joinServices() []string {
	var out []string
	if m := n.Machine(); m != nil && m.Cluster.Join != nil {
		out = append(out, m.Cluster.Join.Endpoints...)
	}
	if t, err := n.loadTicket(); err == nil {
		for _, mb := range t.Members {
			if mb.ControlPlane && mb.Address != "" && !slices.Contains(out, mb.Address) {
				out = append(out, mb.Address)
			}
		}
	}
	return out
}

func (n *Node) certRequest(host string, extra []string) pki.Request {
	req := pki.Request{CommonName: host, Server: true, Client: true,
		DNSNames: []string{client.ServerName, "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	if host != "" {
		req.DNSNames = append(req.DNSNames, host)
	}
	req.IPs = append(req.IPs, n.o.Addresses()...)
	for _, s := range extra {
		if ip := net.ParseIP(s); ip != nil {
			req.IPs = append(req.IPs, ip)
		} else {
			req.DNSNames = append(req.DNSNames, s)
		}
	}
	return req
}

func (n *Node) writeCertificate(cert, ca []byte) error {
	dir := filepath.Join(n.StateDir(), "pki")
	if err := atomicfile.WriteFile(filepath.Join(dir, identityCA), ca, 0o644); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, identityCert), cert, 0o644)
}

// useMutualTLS switches the API to mutual TLS with the identity stored in STATE.
func (n *Node) useMutualTLS(context.Context) error {
	dir := filepath.Join(n.StateDir(), "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, identityCert), filepath.Join(dir, identityKey))
	if err != nil {
		return fmt.Errorf("load the node's machine-API certificate: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, identityCA))
	if err != nil {
		return fmt.Errorf("load the machine CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s holds no certificate", filepath.Join(dir, identityCA))
	}
	n.o.API.UseMutualTLS(cert, pool)
	n.mu.Lock()
	n.apiMTLS = true
	n.mu.Unlock()
	n.o.Log.Info("machine API now requires client certificates from the cluster's machine CA")
	return nil
}

func publicKeyPEM(k *ecdsa.PrivateKey) ([]byte, error) { return pki.EncodePublicKey(k.Public()) }

// IdentityChain is the node's machine-API certificate with the machine CA after it, and its key: what
// the join service presents, so a joining node can pin the CA.
func (n *Node) IdentityChain() (tls.Certificate, error) {
	dir := filepath.Join(n.StateDir(), "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, identityCert), filepath.Join(dir, identityKey))
	if err != nil {
		return tls.Certificate{}, err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, identityCA))
	if err != nil {
		return tls.Certificate{}, err
	}
	ca, err := pki.ParseCert(caPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert.Certificate = append(cert.Certificate, ca.Raw)
	return cert, nil
}

// StateDir is where STATE is now (RAM before its disk is mounted).
func (n *Node) StateDir() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stateDir
}

// setStateDir records where STATE is, as the storage tasks find or mount it.
func (n *Node) setStateDir(dir string) {
	n.mu.Lock()
	n.stateDir = dir
	n.mu.Unlock()
}
