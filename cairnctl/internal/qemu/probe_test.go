package qemu

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSlirp accepts connections like QEMU's user network: the first holdFor are kept open without
// data (guest not up: slirp still sends SYNs), later ones are closed at once (the guest reset them).
func fakeSlirp(t *testing.T, holdFor int32) (port int, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted.Add(1) > holdFor {
				c.Close()
				continue
			}
			go func() { time.Sleep(5 * time.Second); c.Close() }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, accepted
}

func probeVM(port int) *VM {
	return &VM{cfg: Config{Name: "t"}, ports: map[int]int{ProbePort: port}, done: make(chan struct{})}
}

func TestWaitNetworkWaitsForTheReset(t *testing.T) {
	port, accepted := fakeSlirp(t, 2)
	v := probeVM(port)
	start := time.Now()
	if err := v.WaitNetwork(context.Background()); err != nil {
		t.Fatalf("WaitNetwork() = %v", err)
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("WaitNetwork() made %d probes, want 3 (two unanswered, one reset), one at a time", n)
	}
	if d := time.Since(start); d < 2*probeRead {
		t.Errorf("WaitNetwork() returned after %v, before the two unanswered probes timed out", d)
	}
}

func TestWaitNetworkStops(t *testing.T) {
	port, _ := fakeSlirp(t, 1000)
	v := probeVM(port)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := v.WaitNetwork(ctx); err == nil {
		t.Errorf("WaitNetwork(expired ctx) = nil, want an error")
	}
	v = probeVM(port)
	close(v.done) // QEMU exited
	if err := v.WaitNetwork(context.Background()); err == nil {
		t.Errorf("WaitNetwork(QEMU exited) = nil, want an error")
	}
}

// A short ProbeRead probes more often: a boot measurement learns of the guest's network within it.
func TestWaitNetworkProbeRead(t *testing.T) {
	for _, tc := range []struct {
		read      time.Duration
		atLeast   int32
		atMost    int32
		described string
	}{
		{0, 1, 2, "the default (250 ms)"},
		{30 * time.Millisecond, 4, 1000, "30 ms"},
	} {
		port, accepted := fakeSlirp(t, 1000)
		v := probeVM(port)
		v.cfg.ProbeRead = tc.read
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_ = v.WaitNetwork(ctx)
		cancel()
		if n := accepted.Load(); n < tc.atLeast || n > tc.atMost {
			t.Errorf("WaitNetwork() with ProbeRead %s made %d probes in 300 ms, want %d to %d", tc.described, n, tc.atLeast, tc.atMost)
		}
	}
}
