package pki

import (
	"crypto/x509"
	"net"
	"testing"
	"time"
)

func TestSignedLeafVerifies(t *testing.T) {
	now := time.Now()
	caPEM, err := NewCA("test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := caPEM.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	leafPEM, err := ca.Sign(Request{CommonName: "node", Organization: []string{"cairn:admin"}, DNSNames: []string{"n1"},
		IPs: []net.IP{net.ParseIP("10.0.0.1")}, Server: true, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := leafPEM.Parse()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "n1", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("Verify(usage %v) = %v", usage, err)
		}
	}
	if err := leaf.Cert.VerifyHostname("10.0.0.1"); err != nil {
		t.Errorf("IP SAN missing: %v", err)
	}
	if leaf.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Error("leaf outlives its CA")
	}
	if leaf.Cert.IsCA {
		t.Error("leaf is a CA")
	}
	if _, err := leafPEM.ParseCA(); err == nil {
		t.Error("ParseCA accepted a leaf certificate")
	}
}

func TestMismatchedKeyIsRefused(t *testing.T) {
	a, _ := NewCA("a", time.Now())
	b, _ := NewCA("b", time.Now())
	if _, err := (PEM{Cert: a.Cert, Key: b.Key}).Parse(); err == nil {
		t.Fatal("Parse accepted a certificate with another certificate's key")
	}
}

func TestFingerprint(t *testing.T) {
	if got := Fingerprint([]byte("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("Fingerprint = %s", got)
	}
}
