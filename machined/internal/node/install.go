package node

import (
	"context"
	"fmt"

	"github.com/cairn-os/cairn/machined/internal/fsm"
)

// InstallStateError refuses an install while the node is in neither Boot nor Running (Init, Join, a
// reset or an upgrade is under way).
type InstallStateError struct{ State fsm.State }

func (e *InstallStateError) Error() string {
	return fmt.Sprintf("the node is in %s: an install starts from Boot (maintenance) or Running", e.State)
}

// Precondition marks the error for the API (FailedPrecondition).
func (e *InstallStateError) Precondition() {}

// Installing runs write (an install onto a disk) under the sequence lock, from Boot or Running: no Init
// or Join starts meanwhile, and a reboot or shutdown takes over and cancels it, as does the end of ctx.
func (n *Node) Installing(ctx context.Context, write func(context.Context) error) error {
	if st := n.fsm.State(); st != fsm.Boot && st != fsm.Running {
		return &InstallStateError{State: st}
	}
	return n.locked(ctx, fsm.SeqInstall, write)
}

// InstallReboot reboots into the disk an install wrote, as a reboot does: the volumes keep the node's lock
// and data, and a Running node comes back Running.
func (n *Node) InstallReboot(ctx context.Context) error {
	if st := n.fsm.State(); st != fsm.Boot && st != fsm.Running {
		return &InstallStateError{State: st}
	}
	return n.Reboot(ctx)
}
