package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// measuredLock is a real node's measured lock (node.Hooks.Measure): it opens the TPM the first time it is
// needed (the TPM driver is loaded by then), measures the lock once per boot and keeps the state for status.
type measuredLock struct {
	log *slog.Logger
	bus *events.Bus

	mu     sync.Mutex
	opened bool
	m      tpm.Measurer
	state  tpm.State
}

func (l *measuredLock) measure(_ context.Context, c *config.MachineConfig, stateDir string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.opened {
		t, err := tpm.Open(tpm.DevicePath)
		switch {
		case errors.Is(err, tpm.ErrNoTPM):
			l.log.Info("no TPM: the node lock is not measured")
		case err != nil:
			l.log.Warn("the TPM cannot be used: the node lock is not measured", "error", err)
			l.state = tpm.State{Present: true, Error: err.Error()}
		default:
			l.m.TPM = t
		}
		l.opened = true
	}
	if l.m.TPM == nil {
		return nil
	}
	st, err := l.m.MeasureLock(stateDir, c.Cluster.ID, c.Machine.Type)
	l.state = st
	if err == nil {
		l.log.Info("node lock measured", "pcr", tpm.PCR, "value", fmt.Sprintf("%x", st.PCR))
		return nil
	}
	l.bus.Publish(events.Event{Kind: events.KindLock, Outcome: "measurement", Error: err.Error(), Message: "the TPM disagrees with the measured lock"})
	if c.Machine.TPM.ContinueOnMismatch || !st.Measured {
		// A TPM that fails to extend or read is reported, not fatal: the node runs as one without a TPM.
		l.log.Warn("TPM: the node goes on", "error", err)
		return nil
	}
	return fmt.Errorf("%w (machine.tpm.continueOnMismatch lets the node go on)", err)
}

// State reports the TPM for status: false in sandbox mode (nil receiver) and before the first measurement
// (a node in maintenance has not looked for its TPM yet).
func (l *measuredLock) State() (tpm.State, bool) {
	if l == nil {
		return tpm.State{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state, l.opened
}

// PCRs reads PCRs and this boot's measurement log, for the TPMPCRs RPC.
func (l *measuredLock) PCRs(pcrs []int) ([][]byte, tpm.Log, error) {
	if l == nil {
		return nil, tpm.Log{}, errNoTPMHere
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m.TPM == nil {
		return nil, tpm.Log{}, errNoTPMHere
	}
	vals, err := l.m.TPM.Read(pcrs...)
	return vals, l.m.Log(), err
}

// errNoTPMHere: no TPM, or not opened yet (a node in maintenance has not looked for it).
var errNoTPMHere = preconditionError("no TPM in use on this node: the machine has none, the node is in sandbox mode, or it has not taken its lock yet")

type preconditionError string

func (e preconditionError) Error() string { return string(e) }
func (preconditionError) Precondition()   {}
