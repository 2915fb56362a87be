package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// systemdSocket stands in for systemd's notify socket: it sets the environment a Type=notify unit with
// WatchdogSec= gives its service (a 200 ms watchdog) and returns the datagrams machined sends.
func systemdSocket(t *testing.T, watchdog bool) <-chan string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	if watchdog {
		t.Setenv("WATCHDOG_USEC", "200000")
		t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	} else {
		t.Setenv("WATCHDOG_USEC", "")
	}
	got := make(chan string, 100)
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	return got
}

// messages collects what arrives within d, or until enough returns true.
func messages(got <-chan string, d time.Duration, enough func(map[string]int) bool) map[string]int {
	seen := map[string]int{}
	deadline := time.After(d)
	for {
		select {
		case m := <-got:
			seen[m]++
			if enough != nil && enough(seen) {
				return seen
			}
		case <-deadline:
			return seen
		}
	}
}

func TestNotifySystemd(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name       string
		watchdog   bool
		answers    func(block <-chan struct{})
		wantPets   bool
		wantReady  bool
		notService bool
	}{
		{name: "ready and petted while the node answers", watchdog: true, answers: func(<-chan struct{}) {}, wantReady: true, wantPets: true},
		{name: "a node that no longer answers is not petted", watchdog: true, answers: func(b <-chan struct{}) { <-b }, wantReady: true},
		{name: "no watchdog asked for: ready only", answers: func(<-chan struct{}) {}, wantReady: true},
		{name: "not a systemd service: nothing sent", notService: true, answers: func(<-chan struct{}) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := systemdSocket(t, tc.watchdog)
			if tc.notService {
				t.Setenv("NOTIFY_SOCKET", "")
			}
			block := make(chan struct{})
			defer close(block)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var asked atomic.Int32
			notifySystemd(ctx, quiet, func() { asked.Add(1); tc.answers(block) })
			// A pet every 100 ms: wait for three when they are due (a slow machine gets 5 s), else watch
			// for half a second, five periods, that none comes.
			wait, enough := 500*time.Millisecond, func(map[string]int) bool { return false }
			if tc.wantPets {
				wait, enough = 5*time.Second, func(m map[string]int) bool { return m["WATCHDOG=1"] >= 3 }
			}
			seen := messages(got, wait, enough)
			if (seen["READY=1"] == 1) != tc.wantReady {
				t.Errorf("READY=1 sent %d times, want ready=%v (all: %v)", seen["READY=1"], tc.wantReady, seen)
			}
			if pets := seen["WATCHDOG=1"]; (pets >= 3) != tc.wantPets || (!tc.wantPets && pets > 0) {
				t.Errorf("WATCHDOG=1 sent %d times, want pets=%v", pets, tc.wantPets)
			}
			if !tc.wantPets && tc.watchdog && asked.Load() != 1 {
				t.Errorf("a node that does not answer was asked %d times, want once", asked.Load())
			}
			cancel()
			time.Sleep(50 * time.Millisecond) // a pet already under way may still arrive
			messages(got, 0, nil)
			if after := messages(got, 300*time.Millisecond, nil); after["WATCHDOG=1"] > 0 {
				t.Errorf("%d pets after the node stopped (ctx ended)", after["WATCHDOG=1"])
			}
		})
	}
}
