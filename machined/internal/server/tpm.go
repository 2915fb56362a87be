package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// TPMPCRs reads the TPM's PCRs and this boot's measurement log.
func (s *Server) TPMPCRs(_ context.Context, req *machine.TPMPCRsRequest) (*machine.TPMPCRsResponse, error) {
	if s.PCRs == nil {
		return nil, status.Error(codes.FailedPrecondition, "no TPM in use on this node (sandbox mode: the TPM would be the host's)")
	}
	var pcrs []int
	for _, p := range req.Pcrs {
		if p > 23 {
			return nil, status.Errorf(codes.InvalidArgument, "pcrs: %d is not a PCR (0 to 23)", p)
		}
		pcrs = append(pcrs, int(p))
	}
	if len(pcrs) == 0 {
		for i := range 24 {
			pcrs = append(pcrs, i)
		}
	}
	vals, log, err := s.PCRs(pcrs)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &machine.TPMPCRsResponse{MeasuredPcr: uint32(log.PCR)}
	for i, v := range vals {
		resp.Pcrs = append(resp.Pcrs, &machine.TPMPCR{Index: uint32(pcrs[i]), Sha256: v})
	}
	for _, e := range log.Events {
		resp.Log = append(resp.Log, &machine.TPMMeasurement{Time: timestamppb.New(e.Time), Kind: e.Kind, ClusterId: e.ClusterID, Role: e.Role, Digest: e.Digest})
	}
	return resp, nil
}

// TPMAttest relays a join service's TPM challenge for an operator's join: the keys to be challenged, or
// the attestation that answers the challenge. The keys are made again for each call: the EK and AK are
// primary keys of fixed templates, the same each time on this TPM, so the answer is the keys' the
// challenge was made for.
func (s *Server) TPMAttest(_ context.Context, req *machine.TPMAttestRequest) (*machine.TPMAttestResponse, error) {
	if s.Attest == nil {
		return nil, status.Error(codes.FailedPrecondition, "no TPM in use on this node (sandbox mode: the TPM would be the host's)")
	}
	k, err := s.Attest()
	if errors.Is(err, tpm.ErrNoTPM) {
		return nil, status.Error(codes.FailedPrecondition, "this machine has no TPM")
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "the TPM: %v", err)
	}
	defer k.Close()
	if req.Challenge == nil {
		return &machine.TPMAttestResponse{Keys: joinsvc.Keys(k)}, nil
	}
	a, err := joinsvc.Answer(k, req.Challenge)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "answer the challenge: %v", err)
	}
	return &machine.TPMAttestResponse{Attestation: a}, nil
}
