//go:build integration

package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

// The load test's clients (issue 16: at least 200 concurrent mutual-TLS clients): most call Status in a
// loop, the others follow the event stream or machined's log, and two more open a follow stream each and
// never read it.
const (
	statusClients = 150
	eventClients  = 40
	logClients    = 10
)

// loadDuration is how long the clients run: $CAIRN_LOAD_SECONDS, 60 by default.
func loadDuration(t *testing.T) time.Duration {
	s := os.Getenv("CAIRN_LOAD_SECONDS")
	if s == "" {
		return time.Minute
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("CAIRN_LOAD_SECONDS=%q is not a positive number of seconds", s)
	}
	return time.Duration(n) * time.Second
}

// TestLoad runs 202 mutual-TLS clients, each on its own connection, against a Running sandbox node
// for loadDuration. Every Status call must succeed; every event follower must receive every event the
// node publishes meanwhile (refused calls, one every two seconds), although two other clients stall
// their follow streams; and machined must still answer a fresh client afterwards. It prints the calls
// made, their latency (p50, p99, max), machined's RSS before and after, and its live heap and goroutines
// once the clients are gone.
func TestLoad(t *testing.T) {
	d := loadDuration(t)
	dir, root := t.TempDir(), t.TempDir()
	m := startMachined(t, root, freeAddr(t))
	genConfig(t, dir)
	maint := []string{"--nodes", m.addr, "--token", "t0k", "--fingerprint", m.fingerprint()}
	mtls := []string{"--cairnconfig", filepath.Join(dir, "cairnconfig"), "--nodes", m.addr}
	must(t, dir, append(maint, "init", "--config", "controlplane.yaml")...)
	waitStatus(t, dir, mtls, "Running")

	cfg, err := client.LoadConfig(filepath.Join(dir, "cairnconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cfg.Current("")
	if err != nil {
		t.Fatal(err)
	}
	var conns []*grpc.ClientConn
	connect := func() machine.MachineClient {
		c, conn, err := client.Connect(client.Options{Endpoint: m.addr, Context: cc})
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		return c
	}
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
		conns = nil
	}
	defer closeAll()
	rssBefore := rssMiB(t, m.cmd.Process.Pid)

	// The Status clients stop when the time is up (a call in flight finishes); the streams are cancelled
	// after that, so no call fails because the test ended.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var timeUp atomic.Bool
	stop := time.AfterFunc(d, func() { timeUp.Store(true) })
	defer stop.Stop()
	var callers, streams sync.WaitGroup
	var statusErrs, streamErrs atomic.Int64
	var firstErr atomic.Value
	fail := func(counter *atomic.Int64, err error) {
		counter.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	latencies := make([][]time.Duration, statusClients)
	for i := range statusClients {
		c := connect()
		callers.Go(func() {
			for !timeUp.Load() {
				start := time.Now()
				_, err := c.Status(ctx, &machine.StatusRequest{})
				if err != nil {
					fail(&statusErrs, fmt.Errorf("Status: %w", err))
					return
				}
				latencies[i] = append(latencies[i], time.Since(start))
			}
		})
	}
	// Every follower counts the refused-call events it receives.
	authSeen := make([]atomic.Int64, eventClients)
	for i := range eventClients {
		c := connect()
		streams.Go(func() {
			s, err := c.Events(ctx, &machine.EventsRequest{Follow: true, Tail: 1})
			if err != nil {
				fail(&streamErrs, fmt.Errorf("Events: %w", err))
				return
			}
			for {
				e, err := s.Recv()
				if err != nil {
					if ctx.Err() == nil {
						fail(&streamErrs, fmt.Errorf("Events stream: %w", err))
					}
					return
				}
				if e.Kind == "auth" && strings.Contains(e.Message, "Status") {
					authSeen[i].Add(1)
				}
			}
		})
	}
	var logLines atomic.Int64
	for range logClients {
		c := connect()
		streams.Go(func() {
			s, err := c.Logs(ctx, &machine.LogsRequest{Service: "machined", Follow: true, Tail: 10})
			if err != nil {
				fail(&streamErrs, fmt.Errorf("Logs: %w", err))
				return
			}
			for {
				if _, err := s.Recv(); err != nil {
					if ctx.Err() == nil && !errors.Is(err, io.EOF) {
						fail(&streamErrs, fmt.Errorf("Logs stream: %w", err))
					}
					return
				}
				logLines.Add(1)
			}
		})
	}
	// The stalled readers: streams opened and never read.
	if _, err := connect().Events(ctx, &machine.EventsRequest{Follow: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := connect().Logs(ctx, &machine.LogsRequest{Service: "machined", Follow: true}); err != nil {
		t.Fatal(err)
	}

	// The probes: a refused call every two seconds, each one an event every follower must get.
	intruder, conn, err := client.Connect(client.Options{Endpoint: m.addr, Token: "wrong", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	probes := 0
	tick := time.NewTicker(2 * time.Second)
	for !timeUp.Load() {
		<-tick.C
		if _, err := intruder.Status(ctx, &machine.StatusRequest{}); status.Code(err) == codes.Unauthenticated {
			probes++
		} else {
			t.Errorf("a call with a wrong token: %v, want Unauthenticated", err)
		}
	}
	tick.Stop()
	callers.Wait()
	// The last probe's event has had a moment to reach the followers while the callers finished.
	time.Sleep(time.Second)
	cancel()
	streams.Wait()

	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	slices.Sort(all)
	if statusErrs.Load() > 0 || streamErrs.Load() > 0 {
		t.Errorf("%d Status calls and %d streams failed; the first: %v", statusErrs.Load(), streamErrs.Load(), firstErr.Load())
	}
	if len(all) == 0 {
		t.Fatal("no Status call finished")
	}
	minSeen := int64(probes)
	for i := range authSeen {
		minSeen = min(minSeen, authSeen[i].Load())
	}
	if minSeen < int64(probes) {
		t.Errorf("an event follower received %d of the %d refused-call events, with two stalled streams open", minSeen, probes)
	}
	// Afterwards a new client is answered at once: nothing in machined is stuck behind the stalled streams.
	start := time.Now()
	if _, err := connect().Status(context.Background(), &machine.StatusRequest{}); err != nil {
		t.Fatalf("Status after the load: %v", err)
	}
	after := time.Since(start)
	rssLoaded := rssMiB(t, m.cmd.Process.Pid)
	closeAll()
	time.Sleep(10 * time.Second)
	rssAfter := rssMiB(t, m.cmd.Process.Pid)
	live, goroutines := heapAfter(t, connect())
	fmt.Printf("load: %d mutual-TLS clients for %v (%d calling Status, %d following events, %d following machined's log, 2 stalled streams)\n",
		statusClients+eventClients+logClients+2, d, statusClients, eventClients, logClients)
	fmt.Printf("load: %d Status calls (%.0f/s), %d failed; latency p50 %v, p99 %v, max %v; a new client after the load: %v\n",
		len(all), float64(len(all))/d.Seconds(), statusErrs.Load(), pct(all, 50), pct(all, 99), all[len(all)-1].Round(time.Millisecond), after.Round(time.Millisecond))
	fmt.Printf("load: %d refused-call events, each received by every follower (fewest: %d); %d log lines streamed; %d streams failed\n",
		probes, minSeen, logLines.Load(), streamErrs.Load())
	fmt.Printf("load: machined RSS %.1f MiB before, %.1f MiB with the %d connections open after the load, %.1f MiB 10 s after they closed\n",
		rssBefore, rssLoaded, statusClients+eventClients+logClients+3, rssAfter)
	fmt.Printf("load: then machined's live heap is %.1f MiB and it runs %d goroutines\n", live, goroutines)
}

// heapAfter reads machined's live heap (after a garbage collection) and its goroutine count through the
// Profile RPC's text form, whose heap profile ends with runtime.MemStats.
func heapAfter(t *testing.T, c machine.MachineClient) (liveMiB float64, goroutines int) {
	t.Helper()
	read := func(name string) string {
		s, err := c.Profile(context.Background(), &machine.ProfileRequest{Name: name, Debug: 1, Gc: true})
		if err != nil {
			t.Fatalf("Profile %s: %v", name, err)
		}
		var b strings.Builder
		for {
			chunk, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return b.String()
			}
			if err != nil {
				t.Fatalf("Profile %s: %v", name, err)
			}
			b.Write(chunk.Data)
		}
	}
	for _, line := range strings.Split(read("heap"), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			n, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err != nil {
				t.Fatalf("HeapAlloc %q: %v", v, err)
			}
			liveMiB = n / (1 << 20)
		}
	}
	// The goroutine profile's text form starts "goroutine profile: total N".
	first, _, _ := strings.Cut(read("goroutine"), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(first, "goroutine profile: total "))
	if err != nil {
		t.Fatalf("goroutine profile starts %q", first)
	}
	return liveMiB, n
}

// pct is the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)-1)*p/100].Round(100 * time.Microsecond)
}

// rssMiB is a process's resident set (VmRSS).
func rssMiB(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
