package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
)

// JoinTokens makes join tokens (joinsvc.Tokens) and says where the join service listens.
type JoinTokens interface {
	Create(role string, ttl time.Duration, uses uint32) (string, time.Time, error)
}

// CreateJoinToken makes a token that lets a node join this cluster (admin only, control planes only).
func (s *Server) CreateJoinToken(_ context.Context, req *machine.CreateJoinTokenRequest) (*machine.CreateJoinTokenResponse, error) {
	m := s.Node.Machine()
	if s.JoinTokens == nil || m == nil || m.Cluster.Secrets == nil {
		return nil, status.Error(codes.FailedPrecondition, "join tokens are made on a configured control-plane node")
	}
	role := req.Role
	if role == "" {
		role = "worker"
	}
	tok, exp, err := s.JoinTokens.Create(role, time.Duration(req.TtlSeconds)*time.Second, req.Uses)
	var invalid interface{ Invalid() bool }
	if errors.As(err, &invalid) && invalid.Invalid() {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &machine.CreateJoinTokenResponse{Token: tok, Expires: timestamppb.New(exp)}
	for _, a := range s.Node.Status().Addresses {
		resp.Endpoints = append(resp.Endpoints, a+":50001")
	}
	return resp, nil
}
