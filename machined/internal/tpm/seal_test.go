//go:build cgo

package tpm

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
)

// A sealed secret comes back from the TPM that sealed it while the PCRs hold their values; once one of
// them is extended (a boot chain that changed, or a lock measured this boot), or on another TPM, it
// does not, and the caller can tell that from a TPM that failed.
func TestSealUnseal(t *testing.T) {
	tp := simulated(t)
	secret := []byte("the STATE volume's key")
	s, err := tp.Seal(secret, []int{7, PCR})
	if err != nil {
		t.Fatalf("Seal = %v", err)
	}
	if bytes.Contains(s.Private, secret) || bytes.Contains(s.Public, secret) {
		t.Fatalf("the sealed object holds the secret in the clear")
	}
	for i := range 2 { // twice: unsealing does not use it up
		got, err := tp.Unseal(s)
		if err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("Unseal #%d = %q, %v; want the secret", i+1, got, err)
		}
	}
	if _, err := tp.Seal(secret, nil); err == nil {
		t.Errorf("Seal to no PCR = nil error, want a refusal")
	}

	if err := tp.Extend(PCR, sha256.Sum256([]byte("lock"))); err != nil {
		t.Fatal(err)
	}
	if got, err := tp.Unseal(s); !errors.Is(err, ErrPCRsChanged) || got != nil {
		t.Errorf("Unseal after PCR %d changed = %q, %v; want ErrPCRsChanged", PCR, got, err)
	}

	// Sealed again to the new values, then taken to another TPM.
	s, err = tp.Seal(secret, []int{7, PCR})
	if err != nil {
		t.Fatal(err)
	}
	tp.Close()
	other := otherTPM(t)
	if got, err := other.Unseal(s); !errors.Is(err, ErrPCRsChanged) || got != nil {
		t.Errorf("Unseal on another TPM = %q, %v; want ErrPCRsChanged", got, err)
	}
}

// A secret sealed to a value a PCR will hold (not the one it holds) is released only once it does: how
// STATE's key is tied to the boot's point before the node lock is measured.
func TestSealToValues(t *testing.T) {
	tp := simulated(t)
	cur, err := tp.Read(PCR)
	if err != nil {
		t.Fatal(err)
	}
	event := sha256.Sum256([]byte("next"))
	next := sha256.Sum256(append(bytes.Clone(cur[0]), event[:]...))
	secret := []byte("key")
	s, err := tp.SealTo(secret, []int{7, PCR}, map[int][]byte{PCR: next[:]})
	if err != nil {
		t.Fatalf("SealTo = %v", err)
	}
	if got, err := tp.Unseal(s); !errors.Is(err, ErrPCRsChanged) {
		t.Errorf("Unseal before PCR %d holds the value = %q, %v; want ErrPCRsChanged", PCR, got, err)
	}
	if err := tp.Extend(PCR, event); err != nil {
		t.Fatal(err)
	}
	if got, err := tp.Unseal(s); err != nil || !bytes.Equal(got, secret) {
		t.Errorf("Unseal once PCR %d holds the value = %q, %v; want the secret", PCR, got, err)
	}
	if _, err := tp.SealTo(secret, []int{PCR}, map[int][]byte{PCR: {1, 2}}); err == nil {
		t.Errorf("SealTo a 2-byte value = nil error, want a refusal")
	}
}
