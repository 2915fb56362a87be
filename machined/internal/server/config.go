package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/configapply"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/node"
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

// ApplyConfig changes the config of a Running node; see node.ApplyConfig. The changed paths and each step
// stream back as events of kind config.
func (s *Server) ApplyConfig(req *machine.ApplyConfigRequest, stream machine.Machine_ApplyConfigServer) error {
	mode, err := configapply.ParseMode(req.Mode)
	if err != nil {
		return toStatus(err)
	}
	switch {
	case req.Confirm && (req.Rollback || len(req.Config) > 0):
		return status.Error(codes.InvalidArgument, "confirm keeps the config on trial: give it no config and no rollback")
	case req.Rollback && len(req.Config) > 0:
		return status.Error(codes.InvalidArgument, "rollback applies the config before the current one: give it no config")
	case !req.Confirm && !req.Rollback && len(req.Config) == 0:
		return status.Error(codes.InvalidArgument, "config is empty: give the whole new machine config")
	}
	progress := func(msg string) {
		_ = stream.Send(&machine.Event{Time: timestamppb.Now(), Kind: events.KindConfig, Outcome: "progress", Message: msg})
	}
	r := node.ApplyRequest{Config: req.Config, Mode: mode, DryRun: req.DryRun, Timeout: time.Duration(req.TimeoutSeconds) * time.Second,
		Confirm: req.Confirm, Rollback: req.Rollback, Client: clientName(stream.Context())}
	return toStatus(s.Node.ApplyConfig(stream.Context(), r, progress))
}

// ConfigHistory lists the configs applied to the node.
func (s *Server) ConfigHistory(context.Context, *machine.ConfigHistoryRequest) (*machine.ConfigHistoryResponse, error) {
	list, current, err := s.Node.ConfigHistory()
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &machine.ConfigHistoryResponse{}
	marked := false
	for _, e := range list {
		cur := !marked && e.SHA256 == current
		marked = marked || cur
		resp.Entries = append(resp.Entries, &machine.ConfigHistoryEntry{Generation: e.Generation, Time: timestamppb.New(e.Time),
			Client: e.Client, Mode: string(e.Mode), Sha256: e.SHA256, Paths: e.Paths, Current: cur})
	}
	return resp, nil
}
