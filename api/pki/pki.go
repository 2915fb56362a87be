// Package pki creates and reads the certificates Cairn uses: the cluster's CAs (made by `cairnctl gen
// config`) and the leaf certificates signed from them (made on the node). Keys are ECDSA P-256: every
// Kubernetes component accepts them and they are generated in microseconds, which matters on a node booting
// under emulation.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Validity periods.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
)

// KeyPair is a parsed certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// PEM is a certificate and key in PEM form.
type PEM struct {
	Cert []byte
	Key  []byte
}

// Request describes a leaf certificate.
type Request struct {
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool // usable as a TLS server certificate
	Client       bool // usable as a TLS client certificate
	Validity     time.Duration
}

// NewCA creates a self-signed CA.
func NewCA(commonName string, now time.Time) (PEM, error) {
	key, err := NewKey()
	if err != nil {
		return PEM{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return PEM{}, fmt.Errorf("create CA %q: %w", commonName, err)
	}
	return encode(der, key)
}

// Sign issues a leaf certificate from this CA.
func (ca KeyPair) Sign(req Request, now time.Time) (PEM, error) {
	key, err := NewKey()
	if err != nil {
		return PEM{}, err
	}
	der, err := ca.SignPublic(req, key.Public(), now)
	if err != nil {
		return PEM{}, err
	}
	return encode(der, key)
}

// SignPublic issues a certificate for a public key whose private half the caller keeps; it returns DER.
func (ca KeyPair) SignPublic(req Request, pub crypto.PublicKey, now time.Time) ([]byte, error) {
	req.Validity = min(validityOf(req), ca.Cert.NotAfter.Sub(now)) // never outlive the CA
	tmpl := leafTemplate(req, now)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate %q: %w", req.CommonName, err)
	}
	return der, nil
}

// SelfSign issues a self-signed certificate for kp.Key (kp.Cert is ignored); it returns DER.
func (kp KeyPair) SelfSign(req Request, now time.Time) ([]byte, error) {
	tmpl := leafTemplate(req, now)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, kp.Key.Public(), kp.Key)
	if err != nil {
		return nil, fmt.Errorf("self-sign %q: %w", req.CommonName, err)
	}
	return der, nil
}

func validityOf(req Request) time.Duration {
	if req.Validity == 0 {
		return LeafValidity
	}
	return req.Validity
}

func leafTemplate(req Request, now time.Time) *x509.Certificate {
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: req.Organization},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validityOf(req)),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
	}
	if req.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return tmpl
}

// NewKey makes a private key.
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// EncodeKey writes a private key as PKCS#8 PEM.
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodeCert writes a DER certificate as PEM.
func EncodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// EncodePublicKey writes a public key as PKIX PEM (the form kube-apiserver's --service-account-key-file reads).
func EncodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func encode(der []byte, key crypto.Signer) (PEM, error) {
	k, err := EncodeKey(key)
	if err != nil {
		return PEM{}, err
	}
	return PEM{Cert: EncodeCert(der), Key: k}, nil
}

// ParseCert reads the first certificate of a PEM block.
func ParseCert(pemBytes []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return c, nil
}

// ParseKey reads a PEM private key (PKCS#8, EC or PKCS#1).
func ParseKey(pemBytes []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("not a PEM private key")
	}
	var k any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("unsupported PEM block %q for a private key", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("private key cannot sign")
	}
	return s, nil
}

// Parse reads a certificate and its key and checks that they belong together.
func (p PEM) Parse() (KeyPair, error) {
	c, err := ParseCert(p.Cert)
	if err != nil {
		return KeyPair{}, err
	}
	k, err := ParseKey(p.Key)
	if err != nil {
		return KeyPair{}, err
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if pub, ok := k.Public().(equaler); !ok || !pub.Equal(c.PublicKey) {
		return KeyPair{}, errors.New("the private key does not match the certificate")
	}
	return KeyPair{Cert: c, Key: k}, nil
}

// ParseCA reads a CA and checks that it may sign certificates.
func (p PEM) ParseCA() (KeyPair, error) {
	kp, err := p.Parse()
	if err != nil {
		return KeyPair{}, err
	}
	if !kp.Cert.IsCA || kp.Cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return KeyPair{}, errors.New("the certificate is not a CA (basic constraints or key usage)")
	}
	return kp, nil
}

// Fingerprint is the SHA-256 of a DER certificate as lowercase hex; it is what users pin.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

// ParsePublicKey reads a PKIX PEM public key.
func ParsePublicKey(pemBytes []byte) (crypto.PublicKey, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM public key")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	return k, nil
}
