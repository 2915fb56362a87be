package upgrade

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
)

// SignatureName is the optional member after the manifest: an Ed25519 signature of the manifest's bytes.
// The manifest holds every other member's SHA-256, so it signs the whole bundle. A node whose config names
// a public key (machine.upgrade.publicKey) takes only bundles it signs.
const SignatureName = "manifest.sig"

// Signed says whether the bundle carries a signature.
func (br *Reader) Signed() bool { return br.sig != nil }

// Verify checks the bundle's signature against pub.
func (br *Reader) Verify(pub ed25519.PublicKey) error {
	if br.sig == nil {
		return errors.New("the bundle is not signed, and this node takes only bundles signed by machine.upgrade.publicKey")
	}
	if !ed25519.Verify(pub, br.raw, br.sig) {
		return errors.New("the bundle's signature does not match machine.upgrade.publicKey: it was signed by another key, or changed after signing")
	}
	return nil
}

// ParsePublicKey reads a public key as the config holds it: the key's 32 bytes in standard base64.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%q is not an Ed25519 public key (32 bytes in base64)", s)
	}
	return ed25519.PublicKey(b), nil
}

// ParsePrivateKey reads a signing key file: PEM "PRIVATE KEY" (PKCS #8) holding an Ed25519 key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM PRIVATE KEY")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 key", k)
	}
	return ek, nil
}

// GenerateKey makes a signing key: its PEM file and the public key as the config holds it.
func GenerateKey() (keyPEM []byte, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, "", err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), base64.StdEncoding.EncodeToString(pub), nil
}
