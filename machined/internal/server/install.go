package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
)

// InstallOptions are what an Install call asks for.
type InstallOptions struct {
	Disk     config.Selector // empty: the config's machine.install.disk
	Wipe     bool
	NoReboot bool
}

// Installer writes Cairn onto a disk from the live medium (machined's installer).
type Installer interface {
	Install(ctx context.Context, o InstallOptions, progress func(string)) error
}

// Install validates the request, hands it to the installer and streams its progress.
func (s *Server) Install(req *machine.InstallRequest, stream machine.Machine_InstallServer) error {
	if s.Installer == nil {
		return status.Error(codes.Unimplemented, "installing is not available on this node")
	}
	o := InstallOptions{Wipe: req.Wipe, NoReboot: req.NoReboot}
	if d := req.Disk; d != nil {
		o.Disk = config.Selector{Path: d.Path, Serial: d.Serial, Model: d.Model, WWN: d.Wwn, Label: d.Label,
			MinSize: config.Size(d.MinSize), MaxSize: config.Size(d.MaxSize)}
	}
	progress := func(msg string) {
		_ = stream.Send(&machine.Event{Time: timestamppb.Now(), Kind: "install", Outcome: "progress", Message: msg})
	}
	return toStatus(s.Installer.Install(stream.Context(), o, progress))
}
