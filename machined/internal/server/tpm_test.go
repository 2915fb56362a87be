package server

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

func TestTPMPCRs(t *testing.T) {
	if _, err := (&Server{}).TPMPCRs(context.Background(), &machine.TPMPCRsRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("TPMPCRs without a TPM = %v, want FailedPrecondition", err)
	}
	var asked []int
	s := &Server{PCRs: func(pcrs []int) ([][]byte, tpm.Log, error) {
		asked = pcrs
		out := make([][]byte, len(pcrs))
		for i, p := range pcrs {
			out[i] = []byte{byte(p)}
		}
		return out, tpm.Log{PCR: tpm.PCR, Events: []tpm.Event{{Kind: "node-lock", ClusterID: "c1", Role: "worker", Digest: "ab"}}}, nil
	}}
	r, err := s.TPMPCRs(context.Background(), &machine.TPMPCRsRequest{})
	if err != nil || len(asked) != 24 || len(r.Pcrs) != 24 || r.Pcrs[15].Index != 15 || r.Pcrs[15].Sha256[0] != 15 {
		t.Fatalf("TPMPCRs() = %v, %v (asked %v); want the 24 PCRs in order", r, err, asked)
	}
	if r.MeasuredPcr != tpm.PCR || len(r.Log) != 1 || r.Log[0].ClusterId != "c1" {
		t.Errorf("measurement log = %v", r.Log)
	}
	if _, err := s.TPMPCRs(context.Background(), &machine.TPMPCRsRequest{Pcrs: []uint32{24}}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("TPMPCRs(24) = %v, want InvalidArgument", err)
	}
}
