package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/sys"
	"github.com/cairn-os/cairn/machined/internal/timesync"
)

// clock keeps a real node's clock from its config's time servers: the SNTP client starts at the first
// sequence that has a config and lives as long as machined.
type clock struct {
	log    *slog.Logger
	mu     sync.Mutex
	syncer *timesync.Syncer
	stop   context.CancelFunc
}

// start starts the client for c's servers (again when an applied config changed them) and waits, up to
// the config's boot wait, for a first answer. A node without servers keeps the machine's clock. A wait
// that ends without an answer is logged with every server's failure, and the node goes on: the client
// keeps asking.
func (k *clock) start(ctx context.Context, c *config.MachineConfig) error {
	k.mu.Lock()
	s := k.syncer
	if s != nil && !slices.Equal(s.Servers, c.Machine.Time.Servers) {
		k.stop()
		s, k.syncer = nil, nil
	}
	if s == nil && len(c.Machine.Time.Servers) > 0 {
		s = &timesync.Syncer{Servers: slices.Clone(c.Machine.Time.Servers), Step: sys.StepClock, Log: k.log}
		var runCtx context.Context
		runCtx, k.stop = context.WithCancel(context.Background())
		k.syncer = s
		go s.Run(runCtx)
	}
	k.mu.Unlock()
	if s == nil {
		return nil
	}
	if err := s.WaitSynced(ctx, c.Machine.Time.BootWaitOrDefault()); err != nil {
		k.log.Warn("time: starting without a synced clock", "error", err)
	}
	return nil
}

// State is the clock's state for status; false when no time servers are configured.
func (k *clock) State() (timesync.State, bool) {
	k.mu.Lock()
	s := k.syncer
	k.mu.Unlock()
	if s == nil {
		return timesync.State{}, false
	}
	return s.State(), true
}
