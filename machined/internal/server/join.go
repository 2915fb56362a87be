package server

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/joinsvc"
)

// JoinTokens are the cluster's join tokens (joinsvc.Tokens).
type JoinTokens interface {
	Create(ctx context.Context, role string, ttl time.Duration, uses uint32) (string, time.Time, error)
	List(ctx context.Context) ([]joinsvc.Info, error)
	Revoke(ctx context.Context, id string) error
}

// CreateJoinToken makes a token that lets a node join this cluster (admin only, control planes only).
func (s *Server) CreateJoinToken(ctx context.Context, req *machine.CreateJoinTokenRequest) (*machine.CreateJoinTokenResponse, error) {
	if err := s.joinTokensHere(); err != nil {
		return nil, err
	}
	role := req.Role
	if role == "" {
		role = "worker"
	}
	tok, exp, err := s.JoinTokens.Create(ctx, role, time.Duration(req.TtlSeconds)*time.Second, req.Uses)
	if err != nil {
		return nil, tokenStatus(err)
	}
	resp := &machine.CreateJoinTokenResponse{Token: tok, Expires: timestamppb.New(exp)}
	resp.Endpoints = joinEndpoints(s.Node.Status().Addresses, s.JoinPort)
	return resp, nil
}

// joinEndpoints are the join service's HOST:PORT on each of the node's addresses: the port it listens on
// (machined --join-listen), client.JoinPort when unset.
func joinEndpoints(addrs []string, port int) []string {
	if port == 0 {
		port = client.JoinPort
	}
	var eps []string
	for _, a := range addrs {
		eps = append(eps, net.JoinHostPort(a, strconv.Itoa(port)))
	}
	return eps
}

// ListJoinTokens lists the cluster's live join tokens, without their secrets.
func (s *Server) ListJoinTokens(ctx context.Context, _ *machine.ListJoinTokensRequest) (*machine.ListJoinTokensResponse, error) {
	if err := s.joinTokensHere(); err != nil {
		return nil, err
	}
	list, err := s.JoinTokens.List(ctx)
	if err != nil {
		return nil, tokenStatus(err)
	}
	resp := &machine.ListJoinTokensResponse{}
	for _, t := range list {
		resp.Tokens = append(resp.Tokens, &machine.JoinTokenInfo{Id: t.ID, Role: t.Role, Expires: timestamppb.New(t.Expires), UsesLeft: t.UsesLeft})
	}
	return resp, nil
}

// RevokeJoinToken deletes a join token cluster-wide.
func (s *Server) RevokeJoinToken(ctx context.Context, req *machine.RevokeJoinTokenRequest) (*machine.RevokeJoinTokenResponse, error) {
	if err := s.joinTokensHere(); err != nil {
		return nil, err
	}
	if err := s.JoinTokens.Revoke(ctx, req.Id); err != nil {
		return nil, tokenStatus(err)
	}
	return &machine.RevokeJoinTokenResponse{}, nil
}

func (s *Server) joinTokensHere() error {
	m := s.Node.Machine()
	if s.JoinTokens == nil || m == nil || m.Cluster.Secrets == nil {
		return status.Error(codes.FailedPrecondition, "join tokens are managed on a configured control-plane node")
	}
	return nil
}

// tokenStatus maps a token store's error: a malformed request (or an unknown ID to revoke) is
// InvalidArgument; the cluster's API failing to keep the tokens is Unavailable with a RetryInfo, which
// cairnctl's joins retry as they do the join service's.
func tokenStatus(err error) error {
	var invalid interface{ Invalid() bool }
	switch {
	case errors.As(err, &invalid) && invalid.Invalid():
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, new(*joinsvc.ClusterError)):
		return joinsvc.RetryLater(err)
	}
	return toStatus(err)
}
