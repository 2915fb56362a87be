package client

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/pki"
)

func TestCAHash(t *testing.T) {
	ca, err := pki.NewCA("machine-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCert(ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.Raw)
	want := hex.EncodeToString(sum[:])
	// A cairnconfig may keep the PEM without its last newline.
	for _, pemText := range []string{string(ca.Cert), strings.TrimSpace(string(ca.Cert))} {
		if got, err := (&Context{CA: pemText}).CAHash(); err != nil || got != want {
			t.Errorf("CAHash() = %q, %v; want %q (the DER certificate's SHA-256)", got, err, want)
		}
	}
	if got, err := (&Context{CA: "not a certificate"}).CAHash(); err == nil || !strings.Contains(err.Error(), "machine CA") {
		t.Errorf("CAHash() of a broken CA = %q, %v; want an error naming the machine CA", got, err)
	}
}
