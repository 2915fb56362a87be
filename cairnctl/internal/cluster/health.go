package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-os/cairn/api/machine"
)

// healthAttempt bounds one Health call: the node looks names up and asks its API server, which is
// slow on a busy emulated control plane.
const healthAttempt = 30 * time.Second

// WaitHealthy asks check until the node answers that every check passes, pausing between answers, and
// calls report each time the list of failing checks changes (with their messages). When ctx ends first
// it returns an error naming the checks that still failed, or the last error reaching the node.
func WaitHealthy(ctx context.Context, check func(context.Context) (*machine.HealthResponse, error), pause time.Duration,
	report func(failing []string)) error {
	var failing, shown []string
	var last error
	for {
		r, err := check(ctx)
		switch {
		case err == nil && r.Ok:
			return nil
		case err == nil:
			names, now := failedChecks(r)
			if !slices.Equal(names, failing) {
				report(now)
			}
			failing, shown, last = names, now, nil
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("not healthy: %w (last error: %v)", ctx.Err(), last)
			}
			return fmt.Errorf("not healthy: %w; failing: %s", ctx.Err(), strings.Join(shown, "; "))
		case <-time.After(pause):
		}
	}
}

// failedChecks returns the names of the failed checks, and each with its message. A change in the names
// is news; a message alone changes often ("1 of 2 ready").
func failedChecks(r *machine.HealthResponse) (names, shown []string) {
	for _, c := range r.Checks {
		if !c.Ok {
			names, shown = append(names, c.Name), append(shown, c.Name+" ("+c.Message+")")
		}
	}
	return names, shown
}

// healthOnce is one Health call on its own connection.
func healthOnce(ctx context.Context, connect Connect) (*machine.HealthResponse, error) {
	return callOnce(ctx, connect, healthAttempt, func(ctx context.Context, mc machine.MachineClient) (*machine.HealthResponse, error) {
		return mc.Health(ctx, &machine.HealthRequest{})
	})
}
