package kubeapi

import (
	"context"
	"fmt"
	"time"
)

// firstPause is how long Poll waits after its first failed try (at most its interval).
const firstPause = 100 * time.Millisecond

// Poll calls check until it returns nil or ctx ends, then returns ctx's error with the last one. Each
// try gets 20 s. The pause after a failed try starts at 100 ms and doubles up to interval: at native
// speed what Init waits for is often there within a second (etcd healthy, the node Ready), which a fixed
// 2 s pause made 2 s each, while under emulation, where it takes tens of seconds, the tries soon come every
// interval as before and the few early ones are refused connections or cheap answers.
func Poll(ctx context.Context, interval time.Duration, check func(context.Context) error) error {
	var last error
	pause := backoff(interval)
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		last = check(cctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(pause()):
		}
	}
}

// backoff returns Poll's pauses one by one: firstPause (at most interval), then each twice the one
// before, up to interval.
func backoff(interval time.Duration) func() time.Duration {
	next := min(firstPause, interval)
	return func() time.Duration {
		p := next
		next = min(2*next, interval)
		return p
	}
}
