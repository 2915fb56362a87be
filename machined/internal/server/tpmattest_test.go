//go:build cgo

// The TPM simulator is C: this runs where cgo does (make unit, -race).

package server

import (
	"context"
	"testing"

	"github.com/google/go-tpm/tpm2/transport/simulator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// TPMAttest is the node's half of an operator's join's attestation: its keys, then its answer to the
// challenge the join service made for them, which the service then accepts. Without a TPM it says so.
func TestTPMAttest(t *testing.T) {
	ctx := context.Background()
	for name, s := range map[string]*Server{
		"sandbox mode": {},
		"no TPM":       {Attest: func() (joinsvc.Attester, error) { return nil, tpm.ErrNoTPM }},
	} {
		if _, err := s.TPMAttest(ctx, &machine.TPMAttestRequest{}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s: TPMAttest = %v, want FailedPrecondition", name, err)
		}
	}
	sim, err := simulator.OpenSimulator()
	if err != nil {
		t.Fatal(err)
	}
	tp := tpm.New(sim)
	t.Cleanup(func() { tp.Close() })
	s := &Server{Attest: func() (joinsvc.Attester, error) { return tp.AttestationKey() }}

	keys, err := s.TPMAttest(ctx, &machine.TPMAttestRequest{})
	if err != nil || keys.Keys == nil {
		t.Fatalf("TPMAttest() = %v, %v; want the keys", keys, err)
	}
	var v joinsvc.Verifier
	ch, err := v.Challenge(keys.Keys, config.JoinAttestation{})
	if err != nil {
		t.Fatal(err)
	}
	ans, err := s.TPMAttest(ctx, &machine.TPMAttestRequest{Challenge: ch})
	if err != nil || ans.Attestation == nil {
		t.Fatalf("TPMAttest(challenge) = %v, %v; want an attestation", ans, err)
	}
	if note, err := v.Check(ans.Attestation, config.JoinAttestation{Required: true}); err != nil {
		t.Errorf("the join service's check of the relayed answer = %v, want it accepted", err)
	} else {
		t.Log(note)
	}
}
