package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
)

// attestingNode is a joining node with a TPM: it answers TPMAttest with its keys, then with a quote
// made for the challenge it is given (or fails with err).
type attestingNode struct {
	*fakeNode
	err        error
	challenges []*machine.ChallengeResponse
}

func (n *attestingNode) TPMAttest(_ context.Context, r *machine.TPMAttestRequest) (*machine.TPMAttestResponse, error) {
	if n.err != nil {
		return nil, n.err
	}
	if r.Challenge == nil {
		return &machine.TPMAttestResponse{Keys: &machine.ChallengeRequest{EkPublic: []byte("ek"), AkPublic: []byte("ak")}}, nil
	}
	n.challenges = append(n.challenges, r.Challenge)
	return &machine.TPMAttestResponse{Attestation: &machine.Attestation{ChallengeId: r.Challenge.Id, EkPublic: []byte("ek"),
		AkPublic: []byte("ak"), Quote: []byte("quote with " + string(r.Challenge.Nonce))}}, nil
}

// challengingService is a join service that sends challenges.
type challengingService struct {
	*fakeControlPlane
	asked []*machine.ChallengeRequest
}

func (c *challengingService) Challenge(_ context.Context, r *machine.ChallengeRequest) (*machine.ChallengeResponse, error) {
	c.asked = append(c.asked, r)
	return &machine.ChallengeResponse{Id: "c1", Nonce: []byte("n0nce"), Pcrs: []uint32{15}}, nil
}

// An operator's join relays the joining node's TPM attestation: the node's keys to the join service,
// its challenge to the node, and the node's answer in the ticket request. A node whose TPM fails joins
// without one, and a refusal then says both why.
func TestJoinRelaysAttestation(t *testing.T) {
	var node *attestingNode
	var js *challengingService
	e := newJoinEnv(t, func(e *joinEnv) {
		node, js = &attestingNode{fakeNode: e.node}, &challengingService{fakeControlPlane: e.cp}
		e.nodeServer, e.joinService = node, js
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := mustMarshal(t, e.configs.Nodes["demo-w1"])
	if err := JoinNode(ctx, e.target, cfg, false, nil); err != nil {
		t.Fatalf("Join with a TPM = %v", err)
	}
	a := e.cp.ticketReqs[0].Attestation
	if len(js.asked) != 1 || string(js.asked[0].EkPublic) != "ek" || len(node.challenges) != 1 || node.challenges[0].Id != "c1" ||
		a == nil || a.ChallengeId != "c1" || string(a.Quote) != "quote with n0nce" {
		t.Errorf("relay: service asked with %v, node answered %v, ticket request carries %v; want the node's keys, "+
			"the service's challenge c1, and the node's answer to it", js.asked, node.challenges, a)
	}

	node.err = status.Error(codes.Unavailable, "the TPM: TPM_RC_FAILURE")
	e.cp.ticketErr = status.Error(codes.PermissionDenied, "join refused: this cluster admits only nodes that attest")
	err := JoinNode(ctx, e.target, cfg, false, nil)
	if err == nil || !strings.Contains(err.Error(), "only nodes that attest") || !strings.Contains(err.Error(), "TPM_RC_FAILURE") {
		t.Errorf("Join with a failing TPM, refused = %v; want the refusal and the TPM's error", err)
	}
	if got := e.cp.ticketReqs[len(e.cp.ticketReqs)-1].Attestation; got != nil {
		t.Errorf("ticket request after the TPM failed carries %v, want no attestation", got)
	}
}
