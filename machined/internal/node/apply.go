package node

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/configapply"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
)

// DefaultTryTimeout is how long a config applied in try mode waits for a confirm before it is undone;
// it also bounds how long its live changes may take to be healthy.
const DefaultTryTimeout = time.Minute

// liveTimeout bounds the live changes of the other modes, and an undo: a control-plane component restarts
// in a minute or two under emulation.
const liveTimeout = 10 * time.Minute

// ApplyRequest is a changed config for a Running node (cairnctl apply).
type ApplyRequest struct {
	Config  []byte
	Mode    configapply.Mode
	DryRun  bool
	Timeout time.Duration // try mode
	// Confirm keeps what a try applied; Rollback applies the config in force before the current one.
	Confirm, Rollback bool
	// Client names who asks, for the history.
	Client string
}

// NoTrialError: a confirm with no try pending.
type NoTrialError struct{}

func (NoTrialError) Error() string {
	return "no config is on trial: nothing to confirm (a try that was not confirmed in time was undone; see cairnctl events)"
}

// Precondition marks the error for the API (FailedPrecondition).
func (NoTrialError) Precondition() {}

// ApplyConfig applies a changed config to the Running node as the request's mode says, reporting the
// changed paths first (each with what it takes) and then each step. An immutable path, or a change the
// mode cannot make, refuses the whole config and nothing changes. A live change that fails is undone (the
// previous config applied again the same way) and the error says so.
func (n *Node) ApplyConfig(ctx context.Context, req ApplyRequest, progress func(string)) error {
	if st := n.fsm.State(); st != fsm.Running {
		return &NotRunningError{State: st, What: "a changed config is applied only to a Running node"}
	}
	if req.Confirm {
		return n.confirmTry(req.Client, progress)
	}
	raw := req.Config
	if req.Rollback {
		e, prev, err := n.history().Previous(n.nodeLock().Record().ConfigSHA256)
		if err != nil {
			return err
		}
		progress(fmt.Sprintf("rolling back to generation %d (applied %s by %s)", e.Generation, e.Time.Format(time.RFC3339), e.Client))
		raw = prev
	}
	next, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	old := n.Machine()
	changes, err := config.Changes(old, next)
	if err != nil {
		return err
	}
	for _, c := range changes {
		progress(configapply.Describe(c))
	}
	plan, err := configapply.Decide(changes, req.Mode)
	if err != nil {
		return err
	}
	switch {
	case len(changes) == 0:
		progress("no change: the node runs this config already")
		return nil
	case req.DryRun:
		progress("dry run: nothing was changed")
		return nil
	}
	oldRaw, err := n.nodeLock().Config()
	if err != nil {
		return err
	}
	if err := n.startHistory(oldRaw); err != nil {
		return err
	}
	if req.Mode == configapply.Staged {
		if err := n.nodeLock().Stage(raw); err != nil {
			return err
		}
		return n.recorded(req, raw, changes, "staged: the config is stored and takes effect at the next boot", progress)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTryTimeout
	}
	if plan.Live {
		limit := liveTimeout
		if req.Mode == configapply.Try {
			limit = timeout
		}
		err := n.locked(ctx, fsm.SeqApply, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, limit)
			defer cancel()
			return n.applyLive(ctx, next, changes, progress)
		})
		var busy *fsm.BusyError
		if errors.As(err, &busy) {
			return err // another sequence runs: nothing was applied
		}
		if err != nil {
			return n.undo(old, changes, err, progress)
		}
	}
	if !plan.Store { // try
		n.trial.Start(timeout, n.revertTry)
		n.configEvent("applied", fmt.Sprintf("config applied on trial by %s: undone in %s unless confirmed", req.Client, timeout))
		progress(fmt.Sprintf("on trial: confirm within %s (cairnctl apply --confirm), or it is undone; a reboot also undoes it", timeout))
		return nil
	}
	n.trial.Cancel() // a stored config ends any trial: it is the one in force now
	if err := n.nodeLock().ReplaceConfig(raw); err != nil {
		return err
	}
	if err := n.nodeLock().DropStaged(); err != nil { // the later config wins over one staged before it
		return err
	}
	if !plan.RebootAfter {
		return n.recorded(req, raw, changes, "applied: the config is in force and stored", progress)
	}
	if err := n.recorded(req, raw, changes, "stored: rebooting to put it in force", progress); err != nil {
		return err
	}
	return n.Reboot(context.WithoutCancel(ctx))
}

// applyLive applies the live changes: the network and the clock here, the rest by the workload.
func (n *Node) applyLive(ctx context.Context, c *config.MachineConfig, changes []config.Change, progress func(string)) error {
	if configapply.Touches(changes, "machine.network") && n.o.Hooks.Network != nil {
		if err := n.o.Hooks.Network(ctx, c); err != nil {
			return fmt.Errorf("network: %w", err)
		}
		progress("network: applied")
	}
	if configapply.Touches(changes, "machine.time") && n.o.Hooks.Time != nil {
		if err := n.o.Hooks.Time(ctx, c); err != nil {
			return fmt.Errorf("time: %w", err)
		}
		progress("time: the clock follows the new servers")
	}
	if n.o.Hooks.Reconfigure != nil {
		if err := n.o.Hooks.Reconfigure(ctx, c, changes, progress); err != nil {
			return err
		}
	}
	n.mu.Lock()
	n.machine = c
	n.mu.Unlock()
	return nil
}

// undo puts the previous config back after a live change failed, the same way it was applied.
func (n *Node) undo(old *config.MachineConfig, changes []config.Change, cause error, progress func(string)) error {
	progress("failed: " + cause.Error() + "; putting the previous config back")
	err := n.locked(n.life, fsm.SeqApply, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, liveTimeout)
		defer cancel()
		return n.applyLive(ctx, old, changes, progress)
	})
	if err != nil {
		n.configEvent("failed", fmt.Sprintf("a config change failed (%v) and undoing it failed too: %v", cause, err))
		return fmt.Errorf("%w; undoing it failed too: %v (a reboot brings back the stored config)", cause, err)
	}
	n.configEvent("reverted", fmt.Sprintf("a config change failed and was undone: %v", cause))
	return fmt.Errorf("%w; the previous config was put back", cause)
}

// revertTry undoes a try that was not confirmed in time: the stored config is put back in force.
func (n *Node) revertTry() {
	n.o.Log.Warn("the config on trial was not confirmed in time: undoing it")
	err := n.locked(n.life, fsm.SeqApply, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, liveTimeout)
		defer cancel()
		raw, err := n.nodeLock().Config()
		if err != nil {
			return err
		}
		stored, err := ParseConfig(raw)
		if err != nil {
			return err
		}
		changes, err := config.Changes(n.Machine(), stored)
		if err != nil {
			return err
		}
		return n.applyLive(ctx, stored, changes, func(msg string) { n.o.Log.Info("undo try: " + msg) })
	})
	if err != nil {
		n.configEvent("failed", "the config on trial was not confirmed, and undoing it failed: "+err.Error()+" (a reboot brings back the stored config)")
		return
	}
	n.configEvent("reverted", "the config on trial was not confirmed in time and was undone")
}

// confirmTry stores the config on trial as the one in force.
func (n *Node) confirmTry(client string, progress func(string)) error {
	if !n.trial.Confirm() {
		return NoTrialError{}
	}
	cfg := n.Machine()
	raw, err := config.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := n.nodeLock().ReplaceConfig(raw); err != nil {
		return err
	}
	return n.recorded(ApplyRequest{Client: client, Mode: configapply.Try}, raw, nil, "confirmed: the config on trial is stored and stays in force", progress)
}

// recorded adds the config to the history and reports the outcome.
func (n *Node) recorded(req ApplyRequest, raw []byte, changes []config.Change, msg string, progress func(string)) error {
	paths := make([]string, len(changes))
	for i, c := range changes {
		paths[i] = c.Path
	}
	e, err := n.history().Add(configapply.Entry{Client: req.Client, Mode: req.Mode, Time: n.o.Now(), Paths: paths}, raw)
	if err != nil {
		return err
	}
	n.configEvent(string(req.Mode), fmt.Sprintf("config generation %d by %s: %s", e.Generation, req.Client, msg))
	progress(msg)
	return nil
}

// startHistory records the config of Init or Join as the first generation, before the first change.
func (n *Node) startHistory(raw []byte) error {
	h := n.history()
	list, err := h.List()
	if err != nil || len(list) > 0 {
		return err
	}
	_, err = h.Add(n.lockEntry(), raw)
	return err
}

// lockEntry is the history's entry for the config of Init or Join, from the node lock: who took it and when.
func (n *Node) lockEntry() configapply.Entry {
	rec := n.nodeLock().Record()
	return configapply.Entry{Client: rec.Owner, Mode: configapply.Mode(rec.Owner), Time: rec.Taken.UTC(), SHA256: rec.ConfigSHA256}
}

// ConfigHistory lists the configs applied to the node, newest first, and the hash of the one stored.
// Before the first change the history on STATE is empty (startHistory writes Init's or Join's config
// when something first replaces it): the list then holds that config as the generation it will get.
func (n *Node) ConfigHistory() ([]configapply.Entry, string, error) {
	if n.nodeLock() == nil || n.nodeLock().Record() == nil {
		return nil, "", ErrNotLocked
	}
	list, err := n.history().List()
	if err == nil && len(list) == 0 {
		e := n.lockEntry()
		e.Generation = 1
		list = []configapply.Entry{e}
	}
	return list, n.nodeLock().Record().ConfigSHA256, err
}

func (n *Node) history() configapply.History {
	return configapply.History{Dir: filepath.Join(n.StateDir(), configapply.HistoryDir), Now: n.o.Now}
}

func (n *Node) configEvent(outcome, msg string) {
	n.o.Bus.Publish(events.Event{Kind: events.KindConfig, Sequence: string(fsm.SeqApply), Outcome: outcome, Message: msg})
}

// applyStaged puts a staged config in force at boot, before the node's sequence reads it. A staged config
// that no longer validates is dropped with the reason in the log; the stored one stays.
func (n *Node) applyStaged() {
	raw, ok := n.nodeLock().Staged()
	if !ok {
		return
	}
	var err error
	if _, err = ParseConfig(raw); err == nil {
		err = n.nodeLock().ReplaceConfig(raw)
	}
	if err != nil {
		n.o.Log.Error("the staged config is not put in force", "error", err)
		n.configEvent("failed", "the staged config is not put in force: "+err.Error())
	} else {
		n.configEvent("staged", "the staged config is in force from this boot")
	}
	if derr := n.nodeLock().DropStaged(); derr != nil {
		n.o.Log.Warn("remove the staged config", "error", derr)
	}
}
