package qemu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// probeRead is how long one probe waits for the guest's answer. While the guest is not up, QEMU's user
// network accepts the host connection and keeps sending SYNs to the guest; each probe leaves at most
// one such attempt behind, aimed at a port nobody listens on, so none of them can pile onto the API.
// A fresh probe is what notices the guest first (QEMU retransmits a SYN only after seconds), so the
// wait is short: it bounds how late WaitNetwork returns (1 s made every boot look ~0.5 s slower).
const probeRead = 250 * time.Millisecond

// WaitNetwork returns once the guest's TCP stack answers: QEMU's user network accepts every host
// connection at once, whether or not the guest listens, so a successful connect says nothing. A
// connection forwarded to ProbePort, where nothing listens, is closed by QEMU as soon as the guest
// resets it; until then the read times out. After WaitNetwork, poll the API one connection at a time.
func (v *VM) WaitNetwork(ctx context.Context) error {
	exited := v.Exited()
	if exited == nil {
		return errors.New("qemu: not started")
	}
	addr := v.probeAddr()
	var d net.Dialer
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("qemu %s: guest network not up: %w", v.cfg.Name, ctx.Err())
		case <-exited:
			if err := v.Wait(); err != nil {
				return err
			}
			return fmt.Errorf("qemu %s exited before its network came up (console: %s)", v.cfg.Name, v.ConsolePath())
		default:
		}
		if guestReset(ctx, &d, addr, cmp.Or(v.cfg.ProbeRead, probeRead)) {
			return nil
		}
	}
}

// guestReset makes one probe, which waits up to wait, and reports whether the guest refused it.
func guestReset(ctx context.Context, d *net.Dialer, addr string, wait time.Duration) bool {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		// QEMU is not listening yet (or ctx ended): try again shortly.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	var b [1]byte
	_, err = c.Read(b[:])
	// Anything but a timeout means QEMU closed the connection: the guest answered with a reset.
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

// NetworkAnswers makes one probe, waiting up to a second: whether the guest's TCP stack answers now.
func (v *VM) NetworkAnswers(ctx context.Context) bool {
	var d net.Dialer
	return guestReset(ctx, &d, v.probeAddr(), time.Second)
}

// probeAddr is the host's end of the connection forwarded to the guest's ProbePort.
func (v *VM) probeAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(v.ports[ProbePort]))
}
