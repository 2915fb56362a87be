package joinsvc

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// Attested joins (issue 18): a join service challenges a joining node's TPM before it issues a ticket.
// The Verifier keeps the challenges it sent, each answered at most once and only within challengeTTL,
// so a quote cannot be replayed, and checks the answer with tpm.Verify against the cluster's policy
// (cluster.joinAttestation).

// challengeTTL bounds how long a challenge may be answered: a TPM answers in a second or two.
const challengeTTL = 2 * time.Minute

// maxPending bounds the challenges kept at once: asking costs nothing, so a flood must not grow memory.
const maxPending = 256

// Verifier sends challenges and checks the attestations that answer them. The zero value is ready.
type Verifier struct {
	Now    func() time.Time // nil: time.Now
	Random io.Reader        // nil: crypto/rand

	mu      sync.Mutex
	pending map[string]pending
}

type pending struct {
	ch         tpm.Challenge
	credential []byte
	identity   tpm.Identity
	pcrs       []int
	expires    time.Time
}

// quotedPCRs are the PCRs a challenge asks for: the policy's, or the lock's PCR when the policy names
// none (the quote is then checked for being genuine and fresh, and its value is logged).
func quotedPCRs(a config.JoinAttestation) []int {
	if len(a.PCRs) == 0 {
		return []int{tpm.PCR}
	}
	return slices.Sorted(maps.Keys(a.PCRs))
}

// Challenge makes a challenge for the node's EK and AK and keeps it for the attestation that answers it.
func (v *Verifier) Challenge(req *machine.ChallengeRequest, policy config.JoinAttestation) (*machine.ChallengeResponse, error) {
	id := tpm.Identity{EK: req.EkPublic, AK: req.AkPublic}
	if roots := policy.EKRootPool(); roots != nil {
		// Before anything is kept: a TPM of a maker the cluster does not trust gets no challenge.
		if err := tpm.VerifyEKCertificate(req.EkCertificate, req.EkPublic, roots); err != nil {
			return nil, &DeniedError{Reason: "attestation: " + err.Error() + " (cluster.joinAttestation.ekRoots)"}
		}
	}
	ch, cred, err := tpm.NewChallenge(id, v.random())
	if err != nil {
		return nil, &DeniedError{Reason: "attestation: " + err.Error(), invalid: true}
	}
	idb := make([]byte, 16)
	if _, err := io.ReadFull(v.random(), idb); err != nil {
		return nil, err
	}
	p := pending{ch: ch, credential: cred, identity: id, pcrs: quotedPCRs(policy), expires: v.now().Add(challengeTTL)}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pending == nil {
		v.pending = map[string]pending{}
	}
	for k, old := range v.pending {
		if !v.now().Before(old.expires) {
			delete(v.pending, k)
		}
	}
	if len(v.pending) >= maxPending {
		return nil, errors.New("attestation: too many challenges outstanding; try again in a minute")
	}
	key := hex.EncodeToString(idb)
	v.pending[key] = p
	resp := &machine.ChallengeResponse{Id: key, Nonce: ch.Nonce, CredentialBlob: ch.CredentialBlob, EncryptedSecret: ch.Secret}
	for _, i := range p.pcrs {
		resp.Pcrs = append(resp.Pcrs, uint32(i))
	}
	return resp, nil
}

// Check decides a ticket request by the cluster's policy: an attestation must answer a challenge this
// service sent and not yet saw answered, for the same keys, and pass tpm.Verify; a request without one
// is admitted only when the policy does not require it. The result says what was found, for the event.
func (v *Verifier) Check(a *machine.Attestation, policy config.JoinAttestation) (string, error) {
	if a == nil {
		if policy.Required {
			return "", &DeniedError{Reason: "this cluster admits only nodes that attest with a TPM (cluster.joinAttestation.required), and the request carries no attestation"}
		}
		return "no TPM attestation", nil
	}
	v.mu.Lock()
	p, ok := v.pending[a.ChallengeId]
	delete(v.pending, a.ChallengeId) // answered once, right or wrong
	v.mu.Unlock()
	switch {
	case !ok:
		return "", &DeniedError{Reason: "attestation: no open challenge " + a.ChallengeId + " (already answered, expired, or never sent)"}
	case !v.now().Before(p.expires):
		return "", &DeniedError{Reason: "attestation: the challenge expired before it was answered"}
	case !slices.Equal(a.EkPublic, p.identity.EK) || !slices.Equal(a.AkPublic, p.identity.AK):
		return "", &DeniedError{Reason: "attestation: the keys are not the ones the challenge was made for"}
	}
	ev := &tpm.Evidence{Identity: p.identity, Credential: a.Credential, Attest: a.Quote, Signature: a.Signature, PCRs: map[int][]byte{}}
	for i, val := range a.Pcrs {
		ev.PCRs[int(i)] = val
	}
	if err := tpm.Verify(ev, p.ch, p.credential, policy.PCRValues()); err != nil {
		return "", &DeniedError{Reason: "attestation: " + err.Error()}
	}
	for _, i := range p.pcrs {
		if len(ev.PCRs[i]) == 0 {
			return "", &DeniedError{Reason: fmt.Sprintf("attestation: PCR %d was asked for but not quoted", i)}
		}
	}
	return fmt.Sprintf("TPM attested (PCR %d %x)", p.pcrs[0], ev.PCRs[p.pcrs[0]][:8]), nil
}

func (v *Verifier) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

func (v *Verifier) random() io.Reader {
	if v.Random == nil {
		return rand.Reader
	}
	return v.Random
}
