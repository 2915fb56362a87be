package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
)

// EtcdSnapshotFile holds, in STATE, the etcd snapshot an Init restores the cluster's state from.
const EtcdSnapshotFile = "etcd-snapshot.db"

// Init validates a control-plane config, takes the node lock for Init and starts the Init sequence in the
// background. It returns once the lock is taken; follow the events to see the sequence end.
//
// Errors: *ConfigError (invalid config), *nodelock.HeldError or *fsm.BusyError (someone else won: the
// caller lost the race), *fsm.TransitionError (the node is in a state where Init makes no sense).
func (n *Node) Init(ctx context.Context, raw, etcdSnapshot []byte) error {
	cfg, err := ParseConfig(raw)
	if err != nil {
		n.refused(fsm.SeqInit, err)
		return err
	}
	if cfg.Machine.Type != config.TypeControlPlane {
		err := &ConfigError{Err: config.Errors{{Path: "machine.type", Message: fmt.Sprintf("Init needs a %s config; a %s joins a cluster (cairnctl join)", config.TypeControlPlane, cfg.Machine.Type)}}}
		n.refused(fsm.SeqInit, err)
		return err
	}
	var extra map[string][]byte
	if len(etcdSnapshot) > 0 {
		// Kept in STATE with the lock, so an Init cut short by a power loss still restores it.
		extra = map[string][]byte{EtcdSnapshotFile: etcdSnapshot}
	}
	return n.takeLock(ctx, fsm.SeqInit, nodelock.OwnerInit, cfg, raw, extra, nil)
}

// takeLock is the common path of Init and Join: the sequence lock, then the node lock (the one-way
// compare-and-swap that decides the race), then the transition, then the sequence in the background.
func (n *Node) takeLock(ctx context.Context, seq fsm.Sequence, owner string, cfg *config.MachineConfig, raw []byte, extra map[string][]byte, t *ticket) error {
	if n.nodeLock() == nil {
		return errors.New("the node is still booting; try again in a moment")
	}
	if n.nodeLock().Record() == nil && n.fsm.State() == fsm.Boot {
		if err := n.o.Hooks.preflight(ctx, cfg); err != nil {
			n.refused(seq, err)
			return err
		}
	}
	runCtx, release, err := n.seq.Acquire(ctx, n.life, seq)
	if err != nil {
		n.refused(seq, err)
		return err
	}
	if r := n.nodeLock().Record(); r != nil {
		release()
		err := &nodelock.HeldError{Owner: r.Owner}
		n.refused(seq, err)
		return err
	}
	if st := n.fsm.State(); st != fsm.Boot {
		release()
		err := &fsm.TransitionError{From: st, To: stateOf(seq)}
		n.refused(seq, err)
		return err
	}
	if err := n.nodeLock().Take(owner, raw, extra); err != nil {
		release()
		n.refused(seq, err)
		return err
	}
	n.stopJoinClient()
	n.mu.Lock()
	n.machine = cfg
	n.mu.Unlock()
	if cfg.Machine.Hostname != "" {
		n.setHostname(cfg.Machine.Hostname)
	}
	n.o.Bus.Publish(events.Event{Kind: events.KindLock, Sequence: string(seq), Outcome: owner, Message: "node lock taken by " + owner})
	if err := n.fsm.TransitionFrom([]fsm.State{fsm.Boot}, stateOf(seq)); err != nil {
		release()
		return err
	}
	go n.run(runCtx, release, seq, cfg, t)
	return nil
}

func (n *Node) refused(seq fsm.Sequence, err error) {
	n.o.Bus.Publish(events.Event{Kind: events.KindLock, Sequence: string(seq), Outcome: events.Failed, Error: err.Error(), Message: string(seq) + " refused"})
}

func stateOf(seq fsm.Sequence) fsm.State {
	switch seq {
	case fsm.SeqInit:
		return fsm.Init
	case fsm.SeqJoin:
		return fsm.Join
	}
	return fsm.Running
}
