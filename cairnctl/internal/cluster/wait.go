package cluster

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

// Connect opens one connection to a node's machine API.
type Connect func() (machine.MachineClient, *grpc.ClientConn, error)

// Dialer returns a Connect for the given client options.
func Dialer(o client.Options) Connect {
	return func() (machine.MachineClient, *grpc.ClientConn, error) { return client.Connect(o) }
}

// Polling of Status: each attempt gets its own connection and a bounded wait, and attempts follow each
// other, never overlap. QEMU's user network accepts a host connection before the guest listens and
// keeps retrying it; concurrent or abandoned attempts would pile up and land on the API together.
const (
	statusAttempt = 10 * time.Second
	statusPause   = 250 * time.Millisecond
)

// WaitStatus calls Status until done says the answer is the one awaited, one connection at a time.
// It returns the last answer, or the last error when ctx ends first.
func WaitStatus(ctx context.Context, connect Connect, done func(*machine.StatusResponse) bool) (*machine.StatusResponse, error) {
	var last error
	var lastState string
	for {
		s, err := statusOnce(ctx, connect)
		switch {
		case err == nil && done(s):
			return s, nil
		case err == nil:
			lastState, last = s.State, nil
		default:
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("node still %s: %w", lastState, ctx.Err())
			}
			return nil, fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(statusPause):
		}
	}
}

func statusOnce(ctx context.Context, connect Connect) (*machine.StatusResponse, error) {
	return callOnce(ctx, connect, statusAttempt, func(ctx context.Context, mc machine.MachineClient) (*machine.StatusResponse, error) {
		return mc.Status(ctx, &machine.StatusRequest{})
	})
}

// callOnce makes one call on a connection of its own, bounded by timeout, and closes the connection.
func callOnce[T any](ctx context.Context, connect Connect, timeout time.Duration,
	call func(context.Context, machine.MachineClient) (T, error)) (T, error) {
	mc, conn, err := connect()
	if err != nil {
		var zero T
		return zero, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(ctx, mc)
}

// InState is a WaitStatus condition: the node reports one of the states.
func InState(states ...string) func(*machine.StatusResponse) bool {
	return func(s *machine.StatusResponse) bool {
		for _, st := range states {
			if s.State == st {
				return true
			}
		}
		return false
	}
}
