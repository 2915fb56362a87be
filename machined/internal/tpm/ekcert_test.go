//go:build cgo

package tpm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
)

// testCA makes a CA that plays a TPM maker.
func testCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}

// ekCert is a certificate as a TPM maker writes one: for the EK's key, with the TPM's identity in a
// critical subject alternative name that is a directory name, and the TCG's EK certificate purpose.
func ekCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, pub any) []byte {
	t.Helper()
	san, _ := asn1.Marshal([]asn1.RawValue{{Class: 2, Tag: 4, IsCompound: true, Bytes: mustMarshal(t, pkix.Name{CommonName: "tpm"}.ToRDNSequence())}})
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		UnknownExtKeyUsage: []asn1.ObjectIdentifier{{2, 23, 133, 8, 1}},
		ExtraExtensions:    []pkix.Extension{{Id: oidSubjectAltName, Critical: true, Value: san}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := asn1.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeEKCert puts der at the EK certificate's NV index, padded as NV indices often are.
func writeEKCert(t *testing.T, tp *TPM, der []byte) {
	t.Helper()
	data := append(der, make([]byte, 100)...)
	def := tpm2.NVDefineSpace{AuthHandle: tpm2.TPMRHOwner, PublicInfo: tpm2.New2B(tpm2.TPMSNVPublic{
		NVIndex: tpm2.TPMHandle(ECCEKCertIndex), NameAlg: tpm2.TPMAlgSHA256,
		Attributes: tpm2.TPMANV{OwnerWrite: true, OwnerRead: true, AuthRead: true, NT: tpm2.TPMNTOrdinary, NoDA: true},
		DataSize:   uint16(len(data)),
	})}
	if _, err := def.Execute(tp.t); err != nil {
		t.Fatalf("define the EK certificate's index: %v", err)
	}
	pub, _ := def.PublicInfo.Contents()
	name, _ := tpm2.NVName(pub)
	for off := 0; off < len(data); off += maxNVRead {
		chunk := data[off:min(off+maxNVRead, len(data))]
		if _, err := (tpm2.NVWrite{AuthHandle: tpm2.TPMRHOwner, NVIndex: tpm2.NamedHandle{Handle: pub.NVIndex, Name: *name},
			Data: tpm2.TPM2BMaxNVBuffer{Buffer: chunk}, Offset: uint16(off)}).Execute(tp.t); err != nil {
			t.Fatalf("write the EK certificate: %v", err)
		}
		if off == 0 { // written: the index's name changes
			rp, err := tpm2.NVReadPublic{NVIndex: pub.NVIndex}.Execute(tp.t)
			if err != nil {
				t.Fatal(err)
			}
			*name = rp.NVName
		}
	}
}

// The EK certificate is read back from the TPM as its maker wrote it, and verified against the makers a
// cluster trusts: from one of them and for this TPM's EK passes; another maker's, or a certificate of
// that maker for another key, or none, is refused with the reason.
func TestEKCertificate(t *testing.T) {
	tp := simulated(t)
	if der, err := tp.EKCertificate(); err != nil || der != nil {
		t.Fatalf("EKCertificate of a TPM without one = %x, %v; want nothing", der, err)
	}
	k, err := tp.AttestationKey()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ekPub, err := tpm2.Pub(*mustContents(t, k.ek.OutPublic))
	if err != nil {
		t.Fatal(err)
	}
	maker, makerKey := testCA(t, "TPM maker")
	other, _ := testCA(t, "other maker")
	good := ekCert(t, maker, makerKey, ekPub)
	writeEKCert(t, tp, good)
	der, err := tp.EKCertificate()
	if err != nil || string(der) != string(good) {
		t.Fatalf("EKCertificate = %d bytes, %v; want the %d written", len(der), err, len(good))
	}

	pool := func(cs ...*x509.Certificate) *x509.CertPool {
		p := x509.NewCertPool()
		for _, c := range cs {
			p.AddCert(c)
		}
		return p
	}
	ek := k.Identity().EK
	if err := VerifyEKCertificate(der, ek, pool(other, maker)); err != nil {
		t.Errorf("VerifyEKCertificate from a trusted maker = %v", err)
	}
	someKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, tc := range map[string]struct {
		der    []byte
		roots  *x509.CertPool
		reason string
	}{
		"another maker":     {der, pool(other), "not from a trusted TPM maker"},
		"another key":       {ekCert(t, maker, makerKey, someKey.Public()), pool(maker), "for another key"},
		"no certificate":    {nil, pool(maker), "holds no EK certificate"},
		"not a certificate": {[]byte("nope"), pool(maker), "the EK certificate"},
	} {
		if err := VerifyEKCertificate(tc.der, ek, tc.roots); err == nil || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: VerifyEKCertificate = %v, want an error saying %q", name, err, tc.reason)
		}
	}
}

func mustContents(t *testing.T, b tpm2.TPM2BPublic) *tpm2.TPMTPublic {
	t.Helper()
	p, err := b.Contents()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
