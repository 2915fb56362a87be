package joinsvc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
)

// Service is the join service a control-plane node serves on port 50001 once it is Running.
type Service struct {
	machine.UnimplementedJoinServiceServer
	Issuer *Issuer
	Bus    *events.Bus
	// Verifier challenges joining nodes' TPMs (nil: no attestation is asked for or checked).
	Verifier *Verifier

	mu      sync.Mutex
	started bool
}

// RequestTicket implements the join service.
func (s *Service) RequestTicket(ctx context.Context, req *machine.TicketRequest) (*machine.JoinTicket, error) {
	from := peerAddr(ctx)
	attested, err := s.attestation(req)
	var t *machine.JoinTicket
	if err == nil {
		t, err = s.Issuer.Issue(ctx, req)
	}
	var denied *DeniedError
	switch {
	case err == nil:
		s.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: "ticket", Message: fmt.Sprintf("ticket issued to %s (%s) from %s%s", req.NodeName, t.Role, from, attested)})
		return t, nil
	case errors.As(err, &denied) && denied.Invalid():
		err = status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &denied):
		err = status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, ErrControlPlaneJoin):
		err = status.Error(codes.Unimplemented, err.Error())
	case errors.As(err, new(*EtcdError)), errors.As(err, new(*ClusterError)):
		err = RetryLater(err)
	default:
		err = status.Error(codes.Internal, err.Error())
	}
	s.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: events.Failed, Error: status.Convert(err).Message(),
		Message: fmt.Sprintf("join of %q from %s refused", req.NodeName, from)})
	return nil, err
}

// RetryAfter is how long a joining node is told to wait before it asks again for a ticket that this
// control plane could not issue now (a RetryInfo detail of the Unavailable status).
const RetryAfter = 10 * time.Second

// RetryLater is Unavailable with a RetryInfo detail: the request was fine and the cluster was busy, so
// the same request (with a new token) may succeed later. The machine API answers a join token that could
// not be made (a ClusterError) with it too. A plain Unavailable is also what a client's
// transport says for a refused connection or a certificate it does not trust, which no retry mends.
func RetryLater(err error) error {
	st, derr := status.New(codes.Unavailable, err.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(RetryAfter)})
	if derr != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	return st.Err()
}

// peerAddr is the address a call came from, for events.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok {
		return p.Addr.String()
	}
	return ""
}

// attestation checks the request's TPM attestation by the cluster's policy, before its token is spent;
// what it found goes into the ticket's event.
func (s *Service) attestation(req *machine.TicketRequest) (string, error) {
	if s.Verifier == nil {
		return "", nil
	}
	cfg := s.Issuer.Config()
	if cfg == nil {
		return "", errors.New("this node is not a configured control plane")
	}
	note, err := s.Verifier.Check(req.Attestation, cfg.Cluster.JoinAttestation)
	if err != nil {
		return "", err
	}
	return "; " + note, nil
}

// Challenge implements the join service: the first half of a TPM attestation. A TPM the cluster does not
// trust (its maker's CA is not in cluster.joinAttestation.ekRoots) is refused here, as an event.
func (s *Service) Challenge(ctx context.Context, req *machine.ChallengeRequest) (*machine.ChallengeResponse, error) {
	cfg := s.Issuer.Config()
	if s.Verifier == nil || cfg == nil {
		return nil, status.Error(codes.Unimplemented, "this join service does not check attestations")
	}
	r, err := s.Verifier.Challenge(req, cfg.Cluster.JoinAttestation)
	var denied *DeniedError
	switch {
	case err == nil:
		return r, nil
	case errors.As(err, &denied) && denied.Invalid():
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, &denied):
		err = status.Error(codes.PermissionDenied, err.Error())
		s.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: events.Failed, Error: status.Convert(err).Message(),
			Message: "TPM attestation refused to " + peerAddr(ctx)})
		return nil, err
	default:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
}

// RenewCertificate implements the join service.
func (s *Service) RenewCertificate(ctx context.Context, req *machine.RenewRequest) (*machine.RenewResponse, error) {
	cert, err := s.Issuer.Renew(ctx, req)
	var denied *RenewDenied
	switch {
	case err == nil:
		s.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: "renewed", Message: "machine-API certificate renewed for a joined node"})
		return &machine.RenewResponse{MachineCert: cert}, nil
	case errors.As(err, &denied):
		err = status.Error(codes.PermissionDenied, err.Error())
	default:
		err = status.Error(codes.Unavailable, err.Error())
	}
	s.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: events.Failed, Error: status.Convert(err).Message(), Message: "certificate renewal refused"})
	return nil, err
}

// Start serves the join service on addr with the node's certificate (its chain up to the machine CA, so
// a joining node can pin the CA). It is idempotent; the listener lives as long as the process.
func (s *Service) Start(addr string, cert tls.Certificate) error {
	_, err := s.Listen(addr, cert)
	return err
}

// Listen is Start, returning the address it listens on ("" when it was started before).
func (s *Service) Listen(addr string, cert tls.Certificate) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return "", nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("join service: %w", err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}})))
	machine.RegisterJoinServiceServer(g, s)
	go g.Serve(l)
	s.started = true
	return l.Addr().String(), nil
}
