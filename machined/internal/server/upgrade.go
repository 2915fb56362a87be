package server

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
)

// UpgradeOptions are what an Upgrade call asks for besides the bundle.
type UpgradeOptions struct {
	Stage   bool          // write the slot, boot it at the next reboot
	Timeout time.Duration // how long the new slot's first boot has to become healthy
}

// Upgrader writes upgrades and rollbacks into the node's boot slots (machined's upgrader).
type Upgrader interface {
	// Upgrade reads a bundle from r and writes it into the slot that did not boot, then (unless staged)
	// drains the node and reboots it; progress is told each step.
	Upgrade(ctx context.Context, r io.Reader, o UpgradeOptions, progress func(string)) error
	// Rollback makes the other slot boot next and reboots into it; it returns that slot and its version.
	Rollback(ctx context.Context) (slot, version string, err error)
	// Slots reports both slots, or why there are none.
	Slots(ctx context.Context) ([]*machine.BootSlot, error)
}

// Upgrade receives an upgrade bundle and hands it to the upgrader as it arrives, streaming its progress.
func (s *Server) Upgrade(stream machine.Machine_UpgradeServer) error {
	if s.Upgrader == nil {
		return status.Error(codes.Unimplemented, "upgrades are not available on this node")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "the first message must be an UpgradeHeader")
	}
	pr, pw := io.Pipe()
	go func() {
		for {
			m, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				pw.Close()
				return
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			if m.GetHeader() != nil {
				pw.CloseWithError(status.Error(codes.InvalidArgument, "a second UpgradeHeader"))
				return
			}
			if _, err := pw.Write(m.GetData()); err != nil {
				return // the upgrade stopped reading: it failed
			}
		}
	}()
	progress := func(msg string) {
		_ = stream.Send(&machine.Event{Time: timestamppb.Now(), Kind: "upgrade", Outcome: "progress", Message: msg})
	}
	o := UpgradeOptions{Stage: h.Stage, Timeout: time.Duration(h.TimeoutSeconds) * time.Second}
	err = s.Upgrader.Upgrade(stream.Context(), pr, o, progress)
	pr.CloseWithError(errors.New("upgrade ended"))
	return toStatus(err)
}

// Rollback makes the other slot boot next and reboots.
func (s *Server) Rollback(ctx context.Context, _ *machine.RollbackRequest) (*machine.RollbackResponse, error) {
	if s.Upgrader == nil {
		return nil, status.Error(codes.Unimplemented, "rollbacks are not available on this node")
	}
	slot, version, err := s.Upgrader.Rollback(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &machine.RollbackResponse{Slot: slot, Version: version}, nil
}
