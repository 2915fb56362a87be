package tpm

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"fmt"
	"slices"

	"github.com/google/go-tpm/tpm2"
)

// The endorsement key's certificate. A TPM's maker writes a certificate for the TPM's EK into its NV
// memory; a verifier that trusts the maker's CA then knows the EK is a real TPM's, not a key some program
// made. Credential activation (attest.go) already proves the AK lives in the TPM of that EK; the
// certificate says which TPMs those are.

// ECCEKCertIndex is where the TCG's EK credential profile puts the certificate of the ECC P-256 EK
// (tpm2.ECCEKTemplate, the EK Cairn attests with).
const ECCEKCertIndex = 0x01C0000A

// maxNVRead is how much one TPM2_NV_Read returns at most on every TPM Cairn meets (the TPM's
// MAX_NV_BUFFER_SIZE is 1024 or more; TPMs report it, but 512 needs no question).
const maxNVRead = 512

// EKCertificate reads the EK's certificate (DER) from the TPM; nil when the TPM holds none.
func (t *TPM) EKCertificate() ([]byte, error) {
	pub, err := tpm2.NVReadPublic{NVIndex: tpm2.TPMHandle(ECCEKCertIndex)}.Execute(t.t)
	if err != nil {
		if errors.Is(err, tpm2.TPMRCHandle) {
			return nil, nil // no such index: no certificate
		}
		return nil, fmt.Errorf("read the EK certificate's NV index %#x: %w", ECCEKCertIndex, err)
	}
	info, err := pub.NVPublic.Contents()
	if err != nil {
		return nil, err
	}
	index := tpm2.NamedHandle{Handle: info.NVIndex, Name: pub.NVName}
	// The TCG's profile lets anyone read the certificate with the index's own (empty) authorization;
	// some makers allow only the owner's.
	auths := []tpm2.AuthHandle{{Handle: info.NVIndex, Name: pub.NVName, Auth: tpm2.PasswordAuth(nil)},
		{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)}}
	var lastErr error
	for _, auth := range auths {
		var out []byte
		for off := 0; off < int(info.DataSize) && lastErr == nil; off += maxNVRead {
			n := min(maxNVRead, int(info.DataSize)-off)
			r, err := tpm2.NVRead{AuthHandle: auth, NVIndex: index, Size: uint16(n), Offset: uint16(off)}.Execute(t.t)
			if err != nil {
				lastErr = err
				break
			}
			out = append(out, r.Data.Buffer...)
		}
		if lastErr == nil {
			return trimDER(out), nil
		}
		lastErr = nil
	}
	return nil, fmt.Errorf("read the EK certificate at NV index %#x: neither the index's nor the owner's authorization reads it", ECCEKCertIndex)
}

// trimDER drops the padding after a DER certificate (NV indices are often larger than what they hold).
func trimDER(b []byte) []byte {
	var raw asn1.RawValue
	rest, err := asn1.Unmarshal(b, &raw)
	if err != nil {
		return b
	}
	return b[:len(b)-len(rest)]
}

// oidSubjectAltName is X.509's subject alternative name extension. EK certificates carry the TPM's maker,
// model and version there as a directory name, marked critical, which Go's verifier does not interpret.
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// VerifyEKCertificate checks that der is a certificate issued (directly or through intermediates that
// roots holds) by one of roots for the EK whose public area ekPublic is.
func VerifyEKCertificate(der, ekPublic []byte, roots *x509.CertPool) error {
	if len(der) == 0 {
		return errors.New("the TPM holds no EK certificate")
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("the EK certificate: %w", err)
	}
	cert.UnhandledCriticalExtensions = slices.DeleteFunc(cert.UnhandledCriticalExtensions,
		func(o asn1.ObjectIdentifier) bool { return o.Equal(oidSubjectAltName) })
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("the EK certificate (%s, from %s) is not from a trusted TPM maker: %w", cert.Subject, cert.Issuer, err)
	}
	ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](ekPublic)
	if err != nil {
		return fmt.Errorf("the EK: %w", err)
	}
	pub, err := tpm2.Pub(*ek)
	if err != nil {
		return fmt.Errorf("the EK: %w", err)
	}
	certKey, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !certKey.Equal(pub) {
		return errors.New("the EK certificate is for another key than the TPM's EK")
	}
	return nil
}
