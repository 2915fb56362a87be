package tpm

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	"github.com/google/go-tpm/tpm2"
)

// Sealing: a secret (a disk key) that only this TPM gives back, and only while chosen PCRs hold the values
// they held when it was sealed. The secret travels as the TPM's own encrypted object under its storage
// root key (a primary key of a fixed template, so the same key at every boot and on no other TPM); the
// object's policy is the PCRs' values. A machine whose boot chain changed, or another machine's TPM,
// gets an error instead of the secret.

// Sealed is a sealed secret as it is stored: the object's public and private areas, as the TPM marshals
// them, and the PCRs (SHA-256 bank) its policy names.
type Sealed struct {
	Public, Private []byte
	PCRs            []int
}

// ErrPCRsChanged is returned by Unseal when the TPM refuses the policy: the PCRs do not hold the values
// the secret was sealed to (or the object is another TPM's).
var ErrPCRsChanged = errors.New("the TPM's PCRs no longer hold the values the secret was sealed to")

// srk loads the storage root key; the caller flushes it.
func (t *TPM) srk() (*tpm2.CreatePrimaryResponse, error) {
	srk, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHOwner, InPublic: tpm2.New2B(tpm2.ECCSRKTemplate)}.Execute(t.t)
	if err != nil {
		return nil, fmt.Errorf("load the storage root key: %w", err)
	}
	return srk, nil
}

func (t *TPM) flush(h tpm2.TPMHandle) { _, _ = tpm2.FlushContext{FlushHandle: h}.Execute(t.t) }

// Seal seals secret to this TPM and the current values of pcrs.
func (t *TPM) Seal(secret []byte, pcrs []int) (*Sealed, error) { return t.SealTo(secret, pcrs, nil) }

// SealTo seals secret to this TPM and to values of pcrs: the value want gives a PCR, or its current value
// for the others. A value given ahead lets a secret be released only at a point of the boot, before an
// event the PCR records (STATE's key, before the node lock is measured into PCR 15).
func (t *TPM) SealTo(secret []byte, pcrs []int, want map[int][]byte) (*Sealed, error) {
	if len(pcrs) == 0 {
		return nil, errors.New("seal: no PCRs to seal to")
	}
	sel, err := pcrSelection(pcrs)
	if err != nil {
		return nil, err
	}
	// The digest of the values the policy asks for, in the selection's (ascending) order; empty when
	// every value is the current one, which the TPM then reads itself.
	var pcrDigest []byte
	if len(want) > 0 {
		sorted := slices.Sorted(slices.Values(pcrs))
		cur, err := t.Read(sorted...)
		if err != nil {
			return nil, fmt.Errorf("seal: %w", err)
		}
		h := sha256.New()
		for i, p := range sorted {
			v, ok := want[p]
			if !ok {
				v = cur[i]
			}
			if len(v) != sha256.Size {
				return nil, fmt.Errorf("seal: PCR %d: a SHA-256 value has %d bytes, not %d", p, sha256.Size, len(v))
			}
			h.Write(v)
		}
		pcrDigest = h.Sum(nil)
	}
	// The policy's digest, computed by the TPM in a trial session.
	trial, closeTrial, err := tpm2.PolicySession(t.t, tpm2.TPMAlgSHA256, 16, tpm2.Trial())
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	defer closeTrial()
	if _, err := (tpm2.PolicyPCR{PolicySession: trial.Handle(), Pcrs: sel, PcrDigest: tpm2.TPM2BDigest{Buffer: pcrDigest}}).Execute(t.t); err != nil {
		return nil, fmt.Errorf("seal: the PCR policy: %w", err)
	}
	digest, err := tpm2.PolicyGetDigest{PolicySession: trial.Handle()}.Execute(t.t)
	if err != nil {
		return nil, fmt.Errorf("seal: the PCR policy: %w", err)
	}
	srk, err := t.srk()
	if err != nil {
		return nil, err
	}
	defer t.flush(srk.ObjectHandle)
	obj, err := tpm2.Create{
		ParentHandle: tpm2.AuthHandle{Handle: srk.ObjectHandle, Name: srk.Name, Auth: tpm2.PasswordAuth(nil)},
		InSensitive: tpm2.TPM2BSensitiveCreate{Sensitive: &tpm2.TPMSSensitiveCreate{
			Data: tpm2.NewTPMUSensitiveCreate(&tpm2.TPM2BSensitiveData{Buffer: secret}),
		}},
		InPublic: tpm2.New2B(tpm2.TPMTPublic{
			Type:    tpm2.TPMAlgKeyedHash,
			NameAlg: tpm2.TPMAlgSHA256,
			// No password use: the policy alone releases it. No dictionary-attack lockout: a boot that
			// fails the policy must not lock the TPM for the next, healthy one.
			ObjectAttributes: tpm2.TPMAObject{FixedTPM: true, FixedParent: true, NoDA: true},
			AuthPolicy:       digest.PolicyDigest,
		}),
	}.Execute(t.t)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Sealed{Public: tpm2.Marshal(obj.OutPublic), Private: tpm2.Marshal(obj.OutPrivate), PCRs: slices.Clone(pcrs)}, nil
}

// Unseal gives back the secret s holds, when this TPM sealed it and the PCRs hold the same values;
// ErrPCRsChanged when they do not.
func (t *TPM) Unseal(s *Sealed) ([]byte, error) {
	sel, err := pcrSelection(s.PCRs)
	if err != nil {
		return nil, err
	}
	pub, err := tpm2.Unmarshal[tpm2.TPM2BPublic](s.Public)
	if err != nil {
		return nil, fmt.Errorf("unseal: the sealed object: %w", err)
	}
	priv, err := tpm2.Unmarshal[tpm2.TPM2BPrivate](s.Private)
	if err != nil {
		return nil, fmt.Errorf("unseal: the sealed object: %w", err)
	}
	srk, err := t.srk()
	if err != nil {
		return nil, err
	}
	defer t.flush(srk.ObjectHandle)
	obj, err := tpm2.Load{
		ParentHandle: tpm2.AuthHandle{Handle: srk.ObjectHandle, Name: srk.Name, Auth: tpm2.PasswordAuth(nil)},
		InPrivate:    *priv, InPublic: *pub,
	}.Execute(t.t)
	if err != nil {
		// Another TPM's object does not load under this TPM's storage root key (its integrity check fails).
		return nil, fmt.Errorf("unseal: %w: %w", ErrPCRsChanged, err)
	}
	defer t.flush(obj.ObjectHandle)
	sess, closeSess, err := tpm2.PolicySession(t.t, tpm2.TPMAlgSHA256, 16)
	if err != nil {
		return nil, fmt.Errorf("unseal: %w", err)
	}
	defer closeSess()
	if _, err := (tpm2.PolicyPCR{PolicySession: sess.Handle(), Pcrs: sel}).Execute(t.t); err != nil {
		return nil, fmt.Errorf("unseal: the PCR policy: %w", err)
	}
	out, err := tpm2.Unseal{ItemHandle: tpm2.AuthHandle{Handle: obj.ObjectHandle, Name: obj.Name, Auth: sess}}.Execute(t.t)
	if errors.Is(err, tpm2.TPMRCPolicyFail) {
		return nil, ErrPCRsChanged
	}
	if err != nil {
		return nil, fmt.Errorf("unseal: %w", err)
	}
	return out.OutData.Buffer, nil
}
