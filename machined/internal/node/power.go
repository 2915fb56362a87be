package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/events"

	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
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
//
// A reset that wipes STATE is recorded in the node lock before it starts, and STATE is wiped last, so a
// power cut anywhere in it leaves the record for the next boot, which carries the reset on (see
// resumeReset): a node is never left cordoned and Running, or locked without its etcd member.
func (n *Node) Reset(ctx context.Context, o ResetOptions) error {
	cfg := n.Machine()
	recorded := slices.Contains(o.Wipe, "state") && n.nodeLock() != nil && n.nodeLock().Record() != nil
	var before []sequence.Task
	if recorded {
		before = append(before, sequence.Task{Name: "record-reset", Run: func(context.Context) error {
			return n.nodeLock().MarkReset(nodelock.ResetRecord{Wipe: o.Wipe, Graceful: o.Graceful, NoReboot: o.NoReboot, Started: n.o.Now().UTC()})
		}})
	}
	if o.Graceful {
		// Cordon and drain can be undone; leaving (the Node marked left, the etcd member removed) cannot.
		before = append(before, n.o.Hooks.drain()...)
		if recorded {
			before = append(before, sequence.Task{Name: "record-leaving", Run: func(context.Context) error { return n.nodeLock().MarkLeft() }})
		}
		before = append(before, n.o.Hooks.leave()...)
	}
	after := n.o.Hooks.wipe(cfg, stateLast(o.Wipe))
	if slices.Contains(o.Wipe, "state") {
		// After the wipe: the lock (and the reset's record in it) goes only once everything else has.
		// Where STATE was a disk the wipe took the files already; this clears a STATE kept in RAM.
		after = append(after, sequence.Task{Name: "release-node-lock", Run: func(context.Context) error {
			if n.nodeLock() == nil {
				return nil
			}
			if err := n.nodeLock().Clear(); err != nil {
				return err
			}
			// Only when it is there: on the bare mount point a wiped STATE leaves, unlink fails (EROFS).
			pki := filepath.Join(n.nodeLock().Dir(), "pki")
			if _, err := os.Lstat(pki); err != nil {
				return nil
			}
			return os.RemoveAll(pki)
		}})
	}
	return n.power(ctx, fsm.SeqReset, fsm.Reset, before, after, o.NoReboot)
}

// resumeReset carries on a reset that a power cut interrupted (the lock still records it). A graceful
// reset that had not yet begun to take the node out of its cluster starts over once the node is Running
// again, so the cluster sees it leave; any other finishes at once, without the cluster: the node has begun
// leaving it already, or was never asked to leave it politely.
func (n *Node) resumeReset(cfg *config.MachineConfig, rec *nodelock.Record) error {
	r := rec.Reset
	o := ResetOptions{Wipe: r.Wipe, Graceful: r.Graceful, NoReboot: r.NoReboot}
	if r.Graceful && !r.Left && rec.Complete {
		n.resetNote("the reset begun at " + r.Started.Format(time.RFC3339) + " was cut short before the node left its cluster: " +
			"starting the node, then resetting it again")
		n.mu.Lock()
		n.pendingReset = &o
		n.mu.Unlock()
		return n.launch(fsm.SeqStart, fsm.Running, cfg, nil)
	}
	msg := "the reset begun at " + r.Started.Format(time.RFC3339) + " was cut short: finishing it"
	if r.Graceful {
		msg += fmt.Sprintf(" without the cluster, which the node had begun to leave (should its Node or etcd member "+
			"still be listed, remove them from another control plane: cairnctl etcd remove-member %s)", n.Status().Hostname)
	}
	n.resetNote(msg)
	o.Graceful = false
	return n.Reset(n.life, o)
}

// resumePendingReset starts the reset that resumeReset left for the node to do once Running.
func (n *Node) resumePendingReset() {
	n.mu.Lock()
	o := n.pendingReset
	n.pendingReset = nil
	n.mu.Unlock()
	if o == nil {
		return
	}
	// In its own goroutine: Reset takes the sequence lock, which the Start sequence is about to release.
	go func() {
		if err := n.Reset(n.life, *o); err != nil {
			n.setErr(fmt.Errorf("resume the interrupted reset: %w", err))
		}
	}()
}

func (n *Node) resetNote(msg string) {
	n.o.Log.Warn(msg)
	n.o.Bus.Publish(events.Event{Kind: events.KindLock, Sequence: string(fsm.SeqReset), Outcome: "resumed", Message: msg})
}

// stateLast orders the volumes to wipe with STATE at the end: it holds the node lock, which records the
// reset under way until nothing else is left to wipe.
func stateLast(wipe []string) []string {
	out := slices.DeleteFunc(slices.Clone(wipe), func(v string) bool { return v == "state" })
	if len(out) < len(wipe) {
		out = append(out, "state")
	}
	return out
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
	n.trial.Cancel() // the boot after brings the stored config back; a shutdown needs no undo
	go func() {
		n.stopRunningWork()
		tasks := append(append(before, n.o.Hooks.stop(seq)...), after...)
		err := n.runner(false).Run(runCtx, string(seq), tasks)
		n.endSequence(seq, err) // before the release: a status without a sequence has its outcome
		release()
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
