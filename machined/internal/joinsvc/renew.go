package joinsvc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
)

// A joined node's machine-API certificate is signed by the machine CA, whose key only control planes
// hold: a worker renews it by asking a control plane's join service, proving with a signature that it
// holds the certificate's key. The new certificate is for the same key, name and addresses.

// renewSkew is how far the request's time may be from the service's.
const renewSkew = 5 * time.Minute

// RenewDenied says why a renewal is refused (PermissionDenied).
type RenewDenied struct{ Reason string }

func (e *RenewDenied) Error() string { return "certificate renewal refused: " + e.Reason }

// renewDigest is what a renewal request signs: the current certificate and the request's time.
func renewDigest(certDER []byte, unix int64) []byte {
	h := sha256.New()
	h.Write([]byte("cairn machine certificate renewal\x00"))
	h.Write(certDER)
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(unix))
	h.Write(t[:])
	return h.Sum(nil)
}

// NewRenewRequest signs a renewal request for certPEM with its key.
func NewRenewRequest(certPEM []byte, key crypto.Signer, now time.Time) (*machine.RenewRequest, error) {
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return nil, err
	}
	digest := renewDigest(cert.Raw, now.Unix())
	var sig []byte
	if _, ok := key.Public().(ed25519.PublicKey); ok {
		sig, err = key.Sign(rand.Reader, digest, crypto.Hash(0))
	} else {
		sig, err = key.Sign(rand.Reader, digest, crypto.SHA256)
	}
	if err != nil {
		return nil, err
	}
	return &machine.RenewRequest{MachineCert: certPEM, UnixTime: now.Unix(), Signature: sig}, nil
}

// Renew checks a renewal request and signs a new certificate for the same key, name and addresses. The
// current certificate must be the machine CA's and valid now, the request recent and signed by its key,
// and the node must still be in the cluster (NodeKnown).
func (i *Issuer) Renew(ctx context.Context, req *machine.RenewRequest) ([]byte, error) {
	cfg := i.Config()
	if cfg == nil || cfg.Cluster.Secrets == nil {
		return nil, errors.New("this node is not a configured control plane")
	}
	s := cfg.Cluster.Secrets
	ca, err := (pki.PEM{Cert: []byte(s.MachineCA.Cert), Key: []byte(s.MachineCA.Key)}).ParseCA()
	if err != nil {
		return nil, fmt.Errorf("machine CA: %w", err)
	}
	caCert, err := pki.ParseCert([]byte(s.MachineCA.Cert))
	if err != nil {
		return nil, fmt.Errorf("machine CA: %w", err)
	}
	cert, err := pki.ParseCert(req.MachineCert)
	if err != nil {
		return nil, &RenewDenied{Reason: "the certificate does not parse: " + err.Error()}
	}
	now := i.Now()
	switch {
	case cert.CheckSignatureFrom(caCert) != nil:
		return nil, &RenewDenied{Reason: fmt.Sprintf("the certificate of %q is not signed by this cluster's machine CA", cert.Subject.CommonName)}
	case now.Before(cert.NotBefore) || now.After(cert.NotAfter):
		return nil, &RenewDenied{Reason: fmt.Sprintf("the certificate of %q is not valid now (%s to %s): an expired node must join again", cert.Subject.CommonName,
			cert.NotBefore.Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339))}
	case now.Sub(time.Unix(req.UnixTime, 0)).Abs() > renewSkew:
		return nil, &RenewDenied{Reason: fmt.Sprintf("the request's time %s is more than %v from this node's %s", time.Unix(req.UnixTime, 0).UTC().Format(time.RFC3339), renewSkew, now.UTC().Format(time.RFC3339))}
	case !verifySignature(cert.PublicKey, renewDigest(cert.Raw, req.UnixTime), req.Signature):
		return nil, &RenewDenied{Reason: "the request is not signed by the certificate's key"}
	}
	name := cert.Subject.CommonName
	if i.NodeKnown != nil {
		if err := i.NodeKnown(ctx, name); err != nil {
			return nil, err
		}
	}
	der, err := ca.SignPublic(pki.Request{CommonName: name, Server: true, Client: true, DNSNames: cert.DNSNames, IPs: cert.IPAddresses},
		cert.PublicKey, now)
	if err != nil {
		return nil, err
	}
	return pki.EncodeCert(der), nil
}

func verifySignature(pub any, digest, sig []byte) bool {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, digest, sig)
	case ed25519.PublicKey:
		return ed25519.Verify(k, digest, sig)
	}
	return false
}
