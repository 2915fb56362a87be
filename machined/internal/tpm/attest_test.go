//go:build cgo

package tpm

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/go-tpm/tpm2/transport/simulator"
)

// TestAttestation runs the attested join's exchange against the TPM simulator: the honest answer passes,
// and each way of cheating is refused with its reason.
func TestAttestation(t *testing.T) {
	tp := simulated(t)
	if err := tp.Extend(PCR, sha256.Sum256([]byte("lock"))); err != nil {
		t.Fatal(err)
	}
	values, err := tp.Read(PCR, 7)
	if err != nil {
		t.Fatal(err)
	}
	policy := Policy{PCR: values[0], 7: values[1]}
	pcrs := []int{7, PCR}

	key, err := tp.AttestationKey()
	if err != nil {
		t.Fatal(err)
	}
	defer key.Close()
	respond := func(t *testing.T) (*Evidence, Challenge, []byte) {
		t.Helper()
		ch, cred, err := NewChallenge(key.Identity(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := key.Respond(ch, pcrs)
		if err != nil {
			t.Fatal(err)
		}
		return ev, ch, cred
	}

	t.Run("honest", func(t *testing.T) {
		ev, ch, cred := respond(t)
		if err := Verify(ev, ch, cred, policy); err != nil {
			t.Fatalf("Verify(honest answer) = %v", err)
		}
	})

	refused := []struct {
		name   string
		cheat  func(ev *Evidence, ch *Challenge, cred *[]byte, p Policy)
		reason string
	}{
		{"a replayed quote: another challenge's nonce", func(_ *Evidence, ch *Challenge, _ *[]byte, _ Policy) {
			ch.Nonce = bytes.Repeat([]byte{1}, 32)
		}, "nonce"},
		{"a credential the TPM did not recover", func(_ *Evidence, _ *Challenge, cred *[]byte, _ Policy) {
			*cred = bytes.Repeat([]byte{2}, 32)
		}, "credential does not match"},
		{"PCR values other than the quoted ones", func(ev *Evidence, _ *Challenge, _ *[]byte, p Policy) {
			ev.PCRs[PCR] = make([]byte, sha256.Size)
			p[PCR] = ev.PCRs[PCR]
		}, "not the ones quoted"},
		{"a PCR the policy does not accept", func(_ *Evidence, _ *Challenge, _ *[]byte, p Policy) {
			p[PCR] = make([]byte, sha256.Size)
		}, "PCR 15 is"},
		{"a PCR the policy names left out of the quote", func(_ *Evidence, _ *Challenge, _ *[]byte, p Policy) {
			p[0] = make([]byte, sha256.Size)
		}, "leaves out"},
		{"a quote altered after it was signed", func(ev *Evidence, _ *Challenge, _ *[]byte, _ Policy) {
			ev.Attest[len(ev.Attest)-1] ^= 1
		}, "signature"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			ev, ch, cred := respond(t)
			p := Policy{}
			for k, v := range policy {
				p[k] = v
			}
			tc.cheat(ev, &ch, &cred, p)
			if err := Verify(ev, ch, cred, p); err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Verify() = %v, want a refusal saying %q", err, tc.reason)
			}
		})
	}

	t.Run("a key that is not a restricted signing key", func(t *testing.T) {
		id := key.Identity()
		id.AK = id.EK // a decryption key
		if _, _, err := NewChallenge(id, rand.Reader); err == nil || !strings.Contains(err.Error(), "restricted signing key") {
			t.Errorf("NewChallenge(EK as AK) = %v, want a refusal", err)
		}
	})
	// Another TPM's AK cannot answer for this TPM's identity: the credential is bound to the EK.
	t.Run("an AK of another TPM", func(t *testing.T) {
		ch, _, err := NewChallenge(key.Identity(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		// The simulator is one per process: this TPM goes, and the next one is made anew (new seeds).
		key.Close()
		tp.Close()
		other := otherTPM(t)
		okey, err := other.AttestationKey()
		if err != nil {
			t.Fatal(err)
		}
		defer okey.Close()
		if _, err := okey.Respond(ch, pcrs); err == nil || !strings.Contains(err.Error(), "recover the challenge's credential") {
			t.Errorf("Respond(a challenge for another TPM's EK) = %v, want the credential unrecoverable", err)
		}
	})
}

// otherTPM is a new simulated TPM: the simulator is manufactured again when it is opened, with new
// hierarchy seeds, so its EK is another one. The one open before must be closed first.
func otherTPM(t *testing.T) *TPM {
	t.Helper()
	sim, err := simulator.OpenSimulator()
	if err != nil {
		t.Skipf("a second simulator: %v", err)
	}
	tp := New(sim)
	t.Cleanup(func() { tp.Close() })
	return tp
}
