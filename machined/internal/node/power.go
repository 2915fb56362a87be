package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/sequence"
)

// Reboot stops what runs and reboots. It may cancel a running Init, Join or Start: the node lock keeps
// their progress, so they resume after the reboot. In sandbox mode the node reboots in-process: it goes
// back to Boot and runs its boot sequence again.
func (n *Node) Reboot(ctx context.Context) error {
	return n.power(ctx, fsm.SeqReboot, fsm.Reboot, nil, nil, false)
}

// Shutdown stops what runs and powers off (in sandbox mode: ends the process).
func (n *Node) Shutdown(ctx context.Context) error {
	return n.power(ctx, fsm.SeqShutdown, fsm.Shutdown, nil, nil, true)
}

// ResetOptions say what Reset wipes.
type ResetOptions struct {
	// Wipe names the volumes to wipe: state, ephemeral, etcd.
	Wipe     []string
	Graceful bool
	// NoReboot powers the node off once the wipe is done, instead of rebooting it into Boot.
	NoReboot bool
}

// Reset takes the node out of its cluster (graceful: cordon and drain first), stops it, wipes the volumes
// it is told (only disks carrying this cluster's labels; wiping STATE releases the node lock) and reboots
// into Boot.
func (n *Node) Reset(ctx context.Context, o ResetOptions) error {
	cfg := n.Machine()
	var before []sequence.Task
	if o.Graceful {
		before = n.o.Hooks.leave()
	}
	if slices.Contains(o.Wipe, "state") {
		// Before the volumes are unmounted: the lock lives on STATE.
		before = append(before, sequence.Task{Name: "release-node-lock", Run: func(context.Context) error {
			if n.lock == nil {
				return nil
			}
			if err := n.lock.Clear(); err != nil {
				return err
			}
			return os.RemoveAll(filepath.Join(n.lock.Dir(), "pki"))
		}})
	}
	return n.power(ctx, fsm.SeqReset, fsm.Reset, before, n.o.Hooks.wipe(cfg, o.Wipe), o.NoReboot)
}

// power runs a power sequence: take over the sequence lock, move to the state, run the before tasks,
// stop services and unmount, run the after tasks, then power off (off) or reboot. The RPC returns once
// the sequence has started; the work goes on in the background so the reply reaches the client before the
// node goes away.
func (n *Node) power(ctx context.Context, seq fsm.Sequence, state fsm.State, before, after []sequence.Task, off bool) error {
	runCtx, release, err := n.seq.Acquire(ctx, n.life, seq)
	if err != nil {
		return err
	}
	if err := n.fsm.Transition(state); err != nil {
		release()
		return err
	}
	n.stopJoinClient()
	go func() {
		n.stopRunningWork()
		tasks := append(append(before, n.o.Hooks.stop(seq)...), after...)
		err := n.runner(false).Run(runCtx, string(seq), tasks)
		release()
		n.endSequence(seq, err)
		if err != nil {
			return // the node stays in this state with the error in Status; a Shutdown still works
		}
		if off {
			n.finish(n.o.Sys.PowerOff())
			return
		}
		if seq == fsm.SeqReset {
			if err := n.fsm.Transition(fsm.Reboot); err != nil {
				n.setErr(err)
				return
			}
		}
		n.restart()
	}()
	return nil
}

// restart reboots: a real node does not come back from Sys.Reboot; a sandbox node boots again in-process.
func (n *Node) restart() {
	if err := n.o.Sys.Reboot(); err != nil {
		n.setErr(fmt.Errorf("reboot: %w", err))
		return
	}
	if !n.o.Sandbox {
		return
	}
	if err := n.fsm.Transition(fsm.Boot); err != nil {
		n.setErr(err)
		return
	}
	if err := n.boot(); err != nil {
		n.o.Log.Error("boot after in-process reboot failed", "error", err)
	}
}

func (n *Node) finish(err error) {
	n.finishErr = err
	close(n.finished)
}
