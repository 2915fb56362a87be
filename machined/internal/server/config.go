package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
)

// GetConfig returns the config in force with its secrets redacted; an admin may ask for them.
func (s *Server) GetConfig(ctx context.Context, req *machine.GetConfigRequest) (*machine.GetConfigResponse, error) {
	cfg := s.Node.Machine()
	if cfg == nil {
		return nil, status.Error(codes.FailedPrecondition, "the node has no config yet: it is in maintenance mode, waiting for Init or Join")
	}
	if req.ShowSecrets {
		if role, err := roleOf(ctx); err != nil || role != admin {
			return nil, status.Errorf(codes.PermissionDenied, "only the %s role may read the config's secrets", admin)
		}
	} else {
		var err error
		if cfg, err = config.Redact(cfg); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	data, err := config.Marshal(cfg)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &machine.GetConfigResponse{Config: data, Redacted: !req.ShowSecrets}, nil
}
