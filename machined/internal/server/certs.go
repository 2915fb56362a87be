package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/certs"
)

// Certificates lists a node's Kubernetes certificates.
type Certificates interface {
	Certificates(ctx context.Context) ([]certs.Cert, error)
}

// Certificates lists the node's certificates with their expiry and renewal dates. A file that cannot be
// read is reported beside the others, not instead of them.
func (s *Server) Certificates(ctx context.Context, _ *machine.CertificatesRequest) (*machine.CertificatesResponse, error) {
	if s.Certs == nil {
		return nil, status.Error(codes.Unimplemented, "this node lists no certificates (machined runs without Kubernetes)")
	}
	list, err := s.Certs.Certificates(ctx)
	resp := &machine.CertificatesResponse{}
	for _, c := range list {
		pc := &machine.Certificate{Name: c.Name, Subject: c.Subject, Issuer: c.Issuer, Ca: c.CA,
			NotBefore: timestamppb.New(c.NotBefore), NotAfter: timestamppb.New(c.NotAfter)}
		if !c.CA {
			pc.RenewAt = timestamppb.New(c.RenewAt())
		}
		resp.Certificates = append(resp.Certificates, pc)
	}
	if err != nil {
		for _, e := range unjoin(err) {
			resp.Problems = append(resp.Problems, e.Error())
		}
	}
	return resp, nil
}

// unjoin splits an errors.Join into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
