package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/etcdmember"
	"github.com/cairn-os/cairn/machined/internal/etcdops"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/server"
	"github.com/cairn-os/cairn/machined/internal/slots"
	"github.com/cairn-os/cairn/machined/internal/workload"
)

// upgrader is the machine API's view of the boot slots (server.Upgrader): it checks an upgrade against the
// node and its cluster, has the slots written under the sequence lock, leaves the record the next boot
// reads, and reboots through the node.
type upgrader struct {
	slots   *slots.Manager
	node    *node.Node
	etcd    *etcdops.Client // the local member's client; nil on a worker
	version string
	bus     *events.Bus
}

// refusal is an upgrade the node will not do as things are (FailedPrecondition).
type refusal struct{ error }

func (refusal) Precondition() {}

// badBundle is a bundle that is not one, or not for this node (InvalidArgument).
type badBundle struct{ error }

func (badBundle) InvalidArgument() {}

func (u *upgrader) event(outcome, msg string) {
	u.bus.Publish(events.Event{Kind: events.KindUpgrade, Outcome: outcome, Message: msg})
}

func (u *upgrader) Upgrade(ctx context.Context, r io.Reader, o server.UpgradeOptions, progress func(string)) error {
	booted, err := u.slots.Booted()
	if err != nil {
		return refusal{err}
	}
	br, err := upgrade.NewReader(r)
	if err != nil {
		return badBundle{err}
	}
	man := br.Manifest
	if err := upgrade.CheckKubernetes(config.KubernetesVersion, man.Kubernetes); err != nil {
		return refusal{err}
	}
	if err := u.checkSignature(br); err != nil {
		return refusal{err}
	}
	slot := upgrade.Other(booted.Slot)
	signed := "unsigned"
	if br.Signed() {
		signed = "signed"
	}
	progress(fmt.Sprintf("bundle: Cairn %s with Kubernetes %s, %s (this node runs %s with %s from slot %s)",
		man.Version, man.Kubernetes, signed, u.version, config.KubernetesVersion, booted.Slot))
	if !o.Stage {
		if err := u.quorum(ctx); err != nil {
			return refusal{err}
		}
	}
	dir := u.node.StateDir()
	if dir == "" {
		return refusal{errors.New("STATE is not mounted: the upgrade's record has nowhere to go")}
	}
	var next upgrade.Entry
	err = u.node.Upgrading(ctx, func(ctx context.Context) error {
		next, err = u.slots.Write(ctx, br, progress)
		return err
	})
	if err != nil {
		u.event("failed", fmt.Sprintf("upgrade to %s: %v", man.Version, err))
		return err
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = slots.DefaultTrial
	}
	rec := slots.Record{Kind: "upgrade", From: u.version, To: man.Version, Slot: slot, Gen: next.Gen, Staged: o.Stage,
		Timeout: int(timeout / time.Second), Time: time.Now().UTC()}
	if err := slots.WriteRecord(dir, rec); err != nil {
		return fmt.Errorf("write the upgrade record: %w", err)
	}
	if o.Stage {
		msg := fmt.Sprintf("upgrade to %s staged in slot %s: it boots (once, on trial) at the next reboot", man.Version, slot)
		u.event("done", msg)
		progress(msg)
		return nil
	}
	msg := fmt.Sprintf("upgrade to %s written to slot %s: draining the node and rebooting into it", man.Version, slot)
	u.event("started", msg)
	progress(msg)
	return u.node.UpgradeReboot(ctx)
}

// checkSignature requires a bundle signed by machine.upgrade.publicKey when the config names one.
func (u *upgrader) checkSignature(br *upgrade.Reader) error {
	c := u.node.Machine()
	if c == nil || c.Machine.Upgrade.PublicKey == "" {
		return nil
	}
	pub, err := upgrade.ParsePublicKey(c.Machine.Upgrade.PublicKey)
	if err != nil {
		return fmt.Errorf("machine.upgrade.publicKey: %w", err)
	}
	return br.Verify(pub)
}

func (u *upgrader) Rollback(ctx context.Context) (string, string, error) {
	booted, err := u.slots.Booted()
	if err != nil {
		return "", "", refusal{err}
	}
	// Whether there is anything to go back to comes first: it does not depend on the node's state.
	if err := u.slots.CheckRollback(ctx); err != nil {
		return "", "", refusal{err}
	}
	if err := u.quorum(ctx); err != nil {
		return "", "", refusal{err}
	}
	dir := u.node.StateDir()
	if dir == "" {
		return "", "", refusal{errors.New("STATE is not mounted: the rollback's record has nowhere to go")}
	}
	var next upgrade.Entry
	err = u.node.Upgrading(ctx, func(ctx context.Context) error {
		next, err = u.slots.Rollback(ctx)
		return err
	})
	if err != nil {
		return "", "", refusal{err}
	}
	version := "unknown"
	infos, _ := u.Slots(ctx)
	for _, s := range infos {
		if s.Name == next.Slot {
			version = s.Version
		}
	}
	rec := slots.Record{Kind: "rollback", From: u.version, To: version, Slot: next.Slot, Gen: next.Gen, Time: time.Now().UTC()}
	if err := slots.WriteRecord(dir, rec); err != nil {
		return "", "", fmt.Errorf("write the rollback record: %w", err)
	}
	u.event("started", fmt.Sprintf("rollback from %s (slot %s) to %s (slot %s): draining the node and rebooting", u.version, booted.Slot, version, next.Slot))
	return next.Slot, version, u.node.UpgradeReboot(ctx)
}

func (u *upgrader) Slots(ctx context.Context) ([]*machine.BootSlot, error) {
	ss, err := u.slots.Info(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*machine.BootSlot, 0, len(ss))
	for _, s := range ss {
		out = append(out, &machine.BootSlot{Name: s.Name, Version: s.Version, Booted: s.Booted, Next: s.Next, State: s.State})
	}
	return out, nil
}

// quorum refuses to take a control plane down when the etcd members left would not make a quorum: every
// other voting member must answer, short of the quorum's spare. A lone control plane goes down with its
// cluster's API for the reboot, which the operator asked for.
func (u *upgrader) quorum(ctx context.Context) error {
	if u.etcd == nil || u.node.Machine() == nil || u.node.Machine().Machine.Type != config.TypeControlPlane {
		return nil
	}
	ms, err := u.etcd.Members(ctx)
	if err != nil {
		return fmt.Errorf("etcd quorum: cannot list the members: %w", err)
	}
	self := u.node.Status().Hostname
	voters, up := 0, 0
	var down []string
	for _, m := range ms {
		if m.IsLearner {
			continue
		}
		voters++
		if m.Name == self {
			continue
		}
		if answers(ctx, *u.etcd, m) {
			up++
		} else {
			down = append(down, m.Name)
		}
	}
	if voters <= 1 {
		return nil
	}
	if need := voters/2 + 1; up < need {
		return fmt.Errorf("taking this control plane down would lose etcd's quorum: %d voting members need %d, and only %d others answer (down: %v): %s",
			voters, need, up, down, etcdmember.Quorum(ms))
	}
	return nil
}

// answers says whether a member's client URL answers a member list.
func answers(ctx context.Context, c etcdops.Client, m etcdmember.Member) bool {
	if len(m.ClientURLs) == 0 {
		return false
	}
	c.Endpoints = m.ClientURLs[:1]
	c.Timeout = 5 * time.Second
	_, err := c.Members(ctx)
	return err == nil
}

// newTrial follows this boot after an upgrade or a rollback (slots.Trial): healthy is Running with every
// health check passing, and a failed trial reboots gracefully.
func newTrial(m *slots.Manager, n *node.Node, wl *workload.Workload, bus *events.Bus, log *slog.Logger) *slots.Trial {
	return &slots.Trial{M: m, Version: version, Log: log, StateDir: n.StateDir, Uncordon: wl.Uncordon,
		Event: func(outcome, msg string) {
			bus.Publish(events.Event{Kind: events.KindUpgrade, Outcome: outcome, Message: msg})
		},
		Reboot: func(string) {
			if err := n.Reboot(context.Background()); err != nil {
				log.Error("reboot after a failed trial", "error", err)
			}
		},
		Healthy: func(ctx context.Context) error {
			if st := n.State(); st != fsm.Running {
				return fmt.Errorf("the node is in %s", st)
			}
			for _, c := range wl.Health(ctx) {
				if c.Err != nil {
					return fmt.Errorf("%s: %w", c.Name, c.Err)
				}
			}
			return nil
		}}
}
