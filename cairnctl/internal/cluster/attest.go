package cluster

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
)

// relayAttestation is an operator's join's TPM attestation: the joining node's TPM answers the join
// service's challenge through the operator, who talks to both (the node cannot reach a join service it
// has no reason to trust yet). nil, nil when the node has no TPM or the join service checks no
// attestations; an error when the TPM or the exchange fails, which the join goes on without (the
// cluster's policy decides whether that is enough).
func relayAttestation(ctx context.Context, j Joiner) (*machine.Attestation, error) {
	keys, err := j.Node.TPMAttest(ctx, &machine.TPMAttestRequest{})
	switch status.Code(err) {
	case codes.OK:
	case codes.FailedPrecondition, codes.Unimplemented: // no TPM, or an older machined
		return nil, nil
	default:
		return nil, fmt.Errorf("joining node %s: its TPM's keys: %w", j.NodeName, err)
	}
	ch, err := j.JoinService.Challenge(ctx, keys.Keys)
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("join service %s: challenge: %w", j.JoinServiceName, err)
	}
	ans, err := j.Node.TPMAttest(ctx, &machine.TPMAttestRequest{Challenge: ch})
	if err != nil {
		return nil, fmt.Errorf("joining node %s: answer the challenge: %w", j.NodeName, err)
	}
	return ans.Attestation, nil
}
