package tpm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"slices"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// Attestation is the evidence a joining node gives a join service about its TPM, and its check (issue 18's
// attested join). It takes two round trips, as remote attestation over a TPM always does:
//
//  1. the node makes an attestation key (AK: a restricted signing key, a primary of the endorsement
//     hierarchy) and sends its public part with the endorsement key's (EK): Identity;
//  2. the verifier answers with a Challenge: a fresh nonce and a credential, a secret that only the TPM
//     holding that EK can recover, and only for a key with that AK's name (TPM2_ActivateCredential);
//  3. the node recovers the secret and quotes the PCRs the cluster's policy names, with the nonce, signed
//     by the AK: Evidence;
//  4. the verifier (Verify) checks the secret (the AK lives in the TPM of that EK), the AK's attributes (a
//     restricted key made in a TPM, so it signs only quotes the TPM made), the quote's signature and nonce
//     (fresh, from this AK), and the quoted PCR values against the policy.
//
// The EK's certificate, when a cluster names the TPM makers it trusts, is checked against them
// (ekcert.go).

// Identity is the public half of a node's attestation: its EK's and its AK's public areas, as the TPM
// marshals a TPMT_PUBLIC.
type Identity struct {
	EK, AK []byte
	// EKCert is the EK's certificate (DER) from the TPM's NV memory; nil when the TPM holds none or it
	// could not be read.
	EKCert []byte
}

// Challenge is the verifier's answer to an Identity.
type Challenge struct {
	Nonce []byte
	// CredentialBlob and Secret are TPM2_ActivateCredential's inputs: the credential encrypted to the EK,
	// bound to the AK's name.
	CredentialBlob, Secret []byte
}

// Evidence is what the node answers a Challenge with.
type Evidence struct {
	Identity
	// Credential is the secret the TPM recovered from the challenge.
	Credential []byte
	// Attest is the quote (a TPMS_ATTEST as the TPM marshals it) and Signature the AK's signature over it
	// (a TPMT_SIGNATURE).
	Attest, Signature []byte
	// PCRs are the values of the quoted PCRs of the SHA-256 bank, by index.
	PCRs map[int][]byte
}

// akTemplate is the AK: ECC P-256, ECDSA over SHA-256, restricted (it signs only what the TPM itself
// produced, such as quotes), made in and never leaving the TPM.
var akTemplate = tpm2.TPMTPublic{
	Type:    tpm2.TPMAlgECC,
	NameAlg: tpm2.TPMAlgSHA256,
	ObjectAttributes: tpm2.TPMAObject{
		FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, UserWithAuth: true,
		Restricted: true, SignEncrypt: true,
	},
	Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{
		Scheme: tpm2.TPMTECCScheme{
			Scheme:  tpm2.TPMAlgECDSA,
			Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256}),
		},
		CurveID: tpm2.TPMECCNistP256,
	}),
	Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgECC, &tpm2.TPMSECCPoint{
		X: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
		Y: tpm2.TPM2BECCParameter{Buffer: make([]byte, 32)},
	}),
}

// AttestationKey is a node's EK and AK, loaded in its TPM for one attestation.
type AttestationKey struct {
	t       *TPM
	ek, ak  *tpm2.CreatePrimaryResponse
	ekCert  []byte
	ownsTPM bool
}

// AttestationKey loads the EK (the TCG's ECC P-256 template: the same key each time on this TPM) and makes
// an AK. Close flushes both.
func (t *TPM) AttestationKey() (*AttestationKey, error) {
	ek, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHEndorsement, InPublic: tpm2.New2B(tpm2.ECCEKTemplate)}.Execute(t.t)
	if err != nil {
		return nil, fmt.Errorf("load the endorsement key: %w", err)
	}
	ak, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHEndorsement, InPublic: tpm2.New2B(akTemplate)}.Execute(t.t)
	if err != nil {
		_, _ = tpm2.FlushContext{FlushHandle: ek.ObjectHandle}.Execute(t.t)
		return nil, fmt.Errorf("make an attestation key: %w", err)
	}
	// A certificate that cannot be read is left out: only a cluster that trusts named TPM makers needs
	// it, and it refuses the join saying the TPM has none.
	cert, _ := t.EKCertificate()
	return &AttestationKey{t: t, ek: ek, ak: ak, ekCert: cert}, nil
}

// Close unloads the keys, and closes the TPM when OpenAttestationKey opened it.
func (k *AttestationKey) Close() error {
	_, err := tpm2.FlushContext{FlushHandle: k.ak.ObjectHandle}.Execute(k.t.t)
	_, err2 := tpm2.FlushContext{FlushHandle: k.ek.ObjectHandle}.Execute(k.t.t)
	var err3 error
	if k.ownsTPM {
		err3 = k.t.Close()
	}
	return errors.Join(err, err2, err3)
}

// OpenAttestationKey opens the TPM at path for one attestation (ErrNoTPM when there is none); Close
// closes it again. The kernel's resource manager lets it share the TPM with the measured lock.
func OpenAttestationKey(path string) (*AttestationKey, error) {
	t, err := Open(path)
	if err != nil {
		return nil, err
	}
	k, err := t.AttestationKey()
	if err != nil {
		t.Close()
		return nil, err
	}
	k.ownsTPM = true
	return k, nil
}

// Identity is the keys' public halves, for the verifier.
func (k *AttestationKey) Identity() Identity {
	return Identity{EK: k.ek.OutPublic.Bytes(), AK: k.ak.OutPublic.Bytes(), EKCert: k.ekCert}
}

// Respond recovers the challenge's credential (only this TPM can, and only for this AK) and quotes the
// PCRs with the challenge's nonce.
func (k *AttestationKey) Respond(ch Challenge, pcrs []int) (*Evidence, error) {
	act, err := tpm2.ActivateCredential{
		ActivateHandle: tpm2.NamedHandle{Handle: k.ak.ObjectHandle, Name: k.ak.Name},
		KeyHandle: tpm2.AuthHandle{Handle: k.ek.ObjectHandle, Name: k.ek.Name,
			// The EK's policy: the endorsement hierarchy's authorization (empty on a machine as shipped).
			Auth: tpm2.Policy(tpm2.TPMAlgSHA256, 16, func(t transport.TPM, s tpm2.TPMISHPolicy, nonce tpm2.TPM2BNonce) error {
				_, err := tpm2.PolicySecret{AuthHandle: tpm2.TPMRHEndorsement, PolicySession: s, NonceTPM: nonce}.Execute(t)
				return err
			})},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: ch.CredentialBlob},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: ch.Secret},
	}.Execute(k.t.t)
	if err != nil {
		return nil, fmt.Errorf("recover the challenge's credential: %w", err)
	}
	sel, err := pcrSelection(pcrs)
	if err != nil {
		return nil, err
	}
	q, err := tpm2.Quote{
		SignHandle:     tpm2.AuthHandle{Handle: k.ak.ObjectHandle, Name: k.ak.Name, Auth: tpm2.PasswordAuth(nil)},
		QualifyingData: tpm2.TPM2BData{Buffer: ch.Nonce},
		InScheme:       tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
		PCRSelect:      sel,
	}.Execute(k.t.t)
	if err != nil {
		return nil, fmt.Errorf("quote PCRs %v: %w", pcrs, err)
	}
	values, err := k.t.Read(pcrs...)
	if err != nil {
		return nil, err
	}
	ev := &Evidence{Identity: k.Identity(), Credential: act.CertInfo.Buffer, Attest: q.Quoted.Bytes(),
		Signature: tpm2.Marshal(q.Signature), PCRs: map[int][]byte{}}
	for i, p := range pcrs {
		ev.PCRs[p] = values[i]
	}
	return ev, nil
}

func pcrSelection(pcrs []int) (tpm2.TPMLPCRSelection, error) {
	sel := make([]uint, 0, len(pcrs))
	for _, p := range pcrs {
		if p < 0 || p > 23 {
			return tpm2.TPMLPCRSelection{}, fmt.Errorf("PCR %d: a TPM has PCRs 0 to 23", p)
		}
		sel = append(sel, uint(p))
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{
		Hash: tpm2.TPMAlgSHA256, PCRSelect: tpm2.PCClientCompatible.PCRs(sel...)}}}, nil
}

// NewChallenge makes the verifier's challenge for an identity, and the credential the answer must carry.
func NewChallenge(id Identity, random io.Reader) (Challenge, []byte, error) {
	ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](id.EK)
	if err != nil {
		return Challenge{}, nil, fmt.Errorf("the endorsement key's public area: %w", err)
	}
	ak, err := checkAK(id.AK)
	if err != nil {
		return Challenge{}, nil, err
	}
	name, err := tpm2.ObjectName(ak)
	if err != nil {
		return Challenge{}, nil, fmt.Errorf("the attestation key's name: %w", err)
	}
	key, err := tpm2.ImportEncapsulationKey(ek)
	if err != nil {
		return Challenge{}, nil, fmt.Errorf("the endorsement key cannot receive a credential: %w", err)
	}
	nonce, credential := make([]byte, 32), make([]byte, 32)
	if _, err := io.ReadFull(random, nonce); err != nil {
		return Challenge{}, nil, err
	}
	if _, err := io.ReadFull(random, credential); err != nil {
		return Challenge{}, nil, err
	}
	blob, secret, err := tpm2.CreateCredential(random, key, name.Buffer, credential)
	if err != nil {
		return Challenge{}, nil, fmt.Errorf("make the credential: %w", err)
	}
	return Challenge{Nonce: nonce, CredentialBlob: blob, Secret: secret}, credential, nil
}

// checkAK parses an AK's public area and refuses a key that is not a restricted signing key made in a TPM:
// such a key could sign a quote the TPM never made.
func checkAK(data []byte) (*tpm2.TPMTPublic, error) {
	ak, err := tpm2.Unmarshal[tpm2.TPMTPublic](data)
	if err != nil {
		return nil, fmt.Errorf("the attestation key's public area: %w", err)
	}
	a := ak.ObjectAttributes
	if !a.FixedTPM || !a.FixedParent || !a.SensitiveDataOrigin || !a.Restricted || !a.SignEncrypt || a.Decrypt {
		return nil, errors.New("the attestation key is not a restricted signing key made in the TPM")
	}
	if ak.Type != tpm2.TPMAlgECC {
		return nil, fmt.Errorf("the attestation key is not an ECC key (type %v)", ak.Type)
	}
	return ak, nil
}

// Policy is what a cluster requires of a joining node's PCRs (SHA-256 bank): each named PCR must have the
// value given.
type Policy map[int][]byte

// Verify checks a node's answer to a challenge: the credential (the AK is in the TPM of the EK), the
// quote's signature by the AK, its nonce, the quoted PCR values and the policy. Each refusal says why.
func Verify(ev *Evidence, ch Challenge, credential []byte, policy Policy) error {
	if subtle.ConstantTimeCompare(ev.Credential, credential) != 1 {
		return errors.New("the credential does not match: the attestation key is not in the TPM of that endorsement key")
	}
	ak, err := checkAK(ev.AK)
	if err != nil {
		return err
	}
	pub, err := tpm2.Pub(*ak)
	if err != nil {
		return fmt.Errorf("the attestation key: %w", err)
	}
	ecPub, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return errors.New("the attestation key is not an ECDSA key")
	}
	sig, err := tpm2.Unmarshal[tpm2.TPMTSignature](ev.Signature)
	if err != nil {
		return fmt.Errorf("the quote's signature: %w", err)
	}
	es, err := sig.Signature.ECDSA()
	if err != nil {
		return fmt.Errorf("the quote's signature: %w", err)
	}
	digest := sha256.Sum256(ev.Attest)
	r, s := new(big.Int).SetBytes(es.SignatureR.Buffer), new(big.Int).SetBytes(es.SignatureS.Buffer)
	if es.Hash != tpm2.TPMAlgSHA256 || !ecdsa.Verify(ecPub, digest[:], r, s) {
		return errors.New("the quote's signature is not the attestation key's")
	}
	attest, err := tpm2.Unmarshal[tpm2.TPMSAttest](ev.Attest)
	if err != nil {
		return fmt.Errorf("the quote: %w", err)
	}
	if attest.Type != tpm2.TPMSTAttestQuote {
		return fmt.Errorf("the attestation is not a quote (type %#x)", attest.Type)
	}
	if subtle.ConstantTimeCompare(attest.ExtraData.Buffer, ch.Nonce) != 1 {
		return errors.New("the quote is not of this challenge's nonce (an old quote replayed?)")
	}
	info, err := attest.Attested.Quote()
	if err != nil {
		return fmt.Errorf("the quote: %w", err)
	}
	quoted, err := quotedPCRs(info.PCRSelect)
	if err != nil {
		return err
	}
	// The quote signs a digest of the PCRs' values in ascending order; the values sent must give it.
	h := sha256.New()
	for _, p := range quoted {
		v, ok := ev.PCRs[p]
		if !ok {
			return fmt.Errorf("PCR %d is quoted but its value was not sent", p)
		}
		h.Write(v)
	}
	if !bytes.Equal(h.Sum(nil), info.PCRDigest.Buffer) {
		return errors.New("the PCR values sent are not the ones quoted")
	}
	for _, p := range slices.Sorted(maps.Keys(policy)) {
		if !slices.Contains(quoted, p) {
			return fmt.Errorf("the policy names PCR %d, which the quote leaves out", p)
		}
		if !bytes.Equal(ev.PCRs[p], policy[p]) {
			return fmt.Errorf("PCR %d is %x, the policy wants %x", p, ev.PCRs[p], policy[p])
		}
	}
	return nil
}

// quotedPCRs are the PCRs of the SHA-256 bank a quote covers, ascending; any other bank is refused.
func quotedPCRs(sel tpm2.TPMLPCRSelection) ([]int, error) {
	var out []int
	for _, s := range sel.PCRSelections {
		if s.Hash != tpm2.TPMAlgSHA256 {
			return nil, fmt.Errorf("the quote covers a bank other than SHA-256 (%v)", s.Hash)
		}
		for i, b := range s.PCRSelect {
			for bit := range 8 {
				if b&(1<<bit) != 0 {
					out = append(out, i*8+bit)
				}
			}
		}
	}
	return out, nil
}
