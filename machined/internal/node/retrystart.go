package node

import (
	"cmp"
	"fmt"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/fsm"
)

// Waits before a failed start runs again: the first, doubled at each failure in a row, up to the last.
const (
	startRetryFirst = 15 * time.Second
	startRetryMax   = 5 * time.Minute
)

// retryStart runs a failed start again after a wait. The start is the Running path of a node whose lock
// is complete, made of idempotent tasks, so running it again is always safe; without this, one that
// failed on something passing (a control plane restarting beside busy peers, whose API server answered
// too slowly) left the node in Boot, with its cluster one member short, until someone rebooted it. The
// wait doubles with each failure in a row, so a start that cannot succeed (a broken disk, a config the
// payload refuses) retries rarely; its error stays in status with when it runs again. A power sequence,
// a reset or another start in the meantime ends the retry.
func (n *Node) retryStart(cfg *config.MachineConfig, err error) {
	n.mu.Lock()
	n.startFailures++
	failures := n.startFailures
	n.mu.Unlock()
	wait := cmp.Or(n.o.StartRetry, startRetryFirst)
	for i := 1; i < failures && wait < startRetryMax; i++ {
		wait *= 2
	}
	wait = min(wait, startRetryMax)
	n.setErr(fmt.Errorf("%w (failure %d in a row: the start runs again in %s)", err, failures, wait))
	n.o.Log.Warn("start failed: it runs again", "in", wait, "failures", failures)
	go func() {
		select {
		case <-n.life.Done():
			return
		case <-time.After(wait):
		}
		n.mu.Lock()
		current := n.startFailures
		n.mu.Unlock()
		if current != failures || n.fsm.State() != fsm.Boot {
			return // another start ran meanwhile, or the node moved on (a reboot, a reset)
		}
		if err := n.launch(fsm.SeqStart, fsm.Running, cfg, nil); err != nil {
			n.o.Log.Warn("the failed start was not run again", "error", err)
		}
	}()
}

// startSucceeded ends a run of failed starts.
func (n *Node) startSucceeded() {
	n.mu.Lock()
	n.startFailures = 0
	n.mu.Unlock()
}
