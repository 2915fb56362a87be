package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// fakeAPI records the mode switches.
type fakeAPI struct {
	mu          sync.Mutex
	mtls        bool
	maintenance int
}

func (f *fakeAPI) UseMaintenance() { f.mu.Lock(); f.mtls = false; f.maintenance++; f.mu.Unlock() }
func (f *fakeAPI) UseMutualTLS(tls.Certificate, *x509.CertPool) {
	f.mu.Lock()
	f.mtls = true
	f.mu.Unlock()
}
func (f *fakeAPI) state() (bool, int) { f.mu.Lock(); defer f.mu.Unlock(); return f.mtls, f.maintenance }

type fakeSys struct{ reboots, poweroffs atomic.Int32 }

func (f *fakeSys) Reboot() error   { f.reboots.Add(1); return nil }
func (f *fakeSys) PowerOff() error { f.poweroffs.Add(1); return nil }

type harness struct {
	*Node
	api *fakeAPI
	sys *fakeSys
	bus *events.Bus
}

func start(t testing.TB, root string, mod func(*Options)) *harness {
	t.Helper()
	h := &harness{api: &fakeAPI{}, sys: &fakeSys{}, bus: events.NewBus(nil, nil)}
	o := Options{Paths: paths.Paths{Root: root}, Bus: h.bus, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Sys: h.sys, API: h.api, Sandbox: true}
	if mod != nil {
		mod(&o)
	}
	h.Node = New(o)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		// Let a sequence still writing into root finish before the temp dir is removed.
		waitIdle(h.Node)
	})
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// initThenReboot inits the node with cfg, waits for Running, reboots it in-process and waits for
// Running again: the start sequence's way there.
func initThenReboot(t testing.TB, h *harness, cfg []byte) {
	t.Helper()
	if err := h.Init(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
}

func waitIdle(n *Node) {
	for i := 0; i < 500 && n.Status().Sequence != ""; i++ {
		time.Sleep(10 * time.Millisecond)
	}
}

func waitState(t testing.TB, n *Node, want fsm.State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st := n.Status(); st.State == want && st.Sequence == "" {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	st := n.Status()
	t.Fatalf("node state = %s (sequence %q, last error %q), want %s", st.State, st.Sequence, st.LastError, want)
}

// waitAPI waits until the node's API serves with mutual TLS (mtls) or in maintenance mode (!mtls).
func waitAPI(t testing.TB, api *fakeAPI, mtls bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got, _ := api.state(); got == mtls {
			return
		}
	}
	t.Fatalf("the API never switched to mTLS=%v", mtls)
}

func TestInitReachesRunning(t *testing.T) {
	c := testcluster.New(t)
	h := start(t, t.TempDir(), nil)
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if mtls, _ := h.api.state(); !mtls {
		t.Error("API still in maintenance mode after Init")
	}
	st := h.Status()
	if st.LockedBy != nodelock.OwnerInit || st.ClusterName != "test" || st.MachineType != "controlplane" {
		t.Errorf("Status() = %+v", st)
	}
	for _, f := range []string{"lock.json", "config.yaml", "pki/machine.key", "pki/machine.crt", "pki/machine-ca.crt"} {
		if _, err := os.Stat(filepath.Join(h.o.Paths.State(), f)); err != nil {
			t.Errorf("STATE/%s: %v", f, err)
		}
	}
}

func TestRefusedInitChangesNothing(t *testing.T) {
	c := testcluster.New(t)
	tests := map[string][]byte{
		"invalid":   []byte("apiVersion: cairn.dev/v1alpha1\nkind: MachineConfig\nmachine:\n  type: controlplane\n"),
		"empty":     nil,
		"worker":    c.WorkerYAML,
		"unknown":   append([]byte("bogus: 1\n"), c.ControlPlaneYAML...),
		"not yaml!": []byte("{{{"),
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			h := start(t, t.TempDir(), nil)
			err := h.Init(context.Background(), cfg, nil)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("Init() = %v, want ConfigError", err)
			}
			if st := h.State(); st != fsm.Boot {
				t.Errorf("state = %s after a refused Init, want Boot", st)
			}
			entries, _ := os.ReadDir(h.o.Paths.State())
			if len(entries) != 0 {
				t.Errorf("STATE holds %d entries after a refused Init; nothing may be written", len(entries))
			}
		})
	}
}

// TestRefusedJoinTicketChangesNothing: tickets that are not for this node, or a control-plane ticket that
// does not say which etcd cluster to join, are refused before anything is written.
func TestRefusedJoinTicketChangesNothing(t *testing.T) {
	c := testcluster.New(t)
	other := testcluster.New(t)
	tests := map[string]struct {
		cfg    []byte
		ticket func(t testing.TB, pub []byte) *machine.JoinTicket
		want   string
	}{
		"other cluster": {c.WorkerYAML, func(t testing.TB, pub []byte) *machine.JoinTicket { return other.Ticket(t, pub) }, "is for cluster"},
		"other node's key": {c.WorkerYAML, func(t testing.TB, _ []byte) *machine.JoinTicket {
			k, _ := pki.NewKey()
			pub, _ := pki.EncodePublicKey(k.Public())
			return c.Ticket(t, pub)
		}, "another node's key"},
		"role differs from config": {c.ControlPlaneYAML, c.Ticket, "admits a worker"},
		"control plane without etcd cluster": {c.ControlPlaneYAML, func(t testing.TB, pub []byte) *machine.JoinTicket {
			tk := c.Ticket(t, pub)
			tk.Role, tk.Config = config.TypeControlPlane, c.ControlPlaneYAML
			return tk
		}, "etcd cluster to join"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := start(t, t.TempDir(), nil)
			raw, err := proto.Marshal(tc.ticket(t, h.Status().PublicKeyPEM))
			if err != nil {
				t.Fatal(err)
			}
			err = h.Join(context.Background(), tc.cfg, raw)
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Join() = %v, want a ConfigError with %q", err, tc.want)
			}
			if st := h.State(); st != fsm.Boot {
				t.Errorf("state = %s after a refused Join, want Boot", st)
			}
			if entries, _ := os.ReadDir(h.o.Paths.State()); len(entries) != 0 {
				t.Errorf("STATE holds %d entries after a refused Join; nothing may be written", len(entries))
			}
		})
	}
}

// TestInitAndJoinRace races an operator's Init against a Join on fresh nodes a thousand times: exactly one
// takes the lock every time, and the loser is told who won.
func TestInitAndJoinRace(t *testing.T) {
	rounds := 1000
	if testing.Short() {
		rounds = 100
	}
	c := testcluster.New(t)
	base := memTempDir(t)
	for i := range rounds {
		func() {
			h := start(t, filepath.Join(base, "n"+itoa(i)), nil)
			ticket := c.TicketBytes(t, h.Status().PublicKeyPEM)
			var wg sync.WaitGroup
			var initErr, joinErr error
			wg.Add(2)
			go func() { defer wg.Done(); initErr = h.Init(context.Background(), c.ControlPlaneYAML, nil) }()
			go func() { defer wg.Done(); joinErr = h.Join(context.Background(), nil, ticket) }()
			wg.Wait()
			if (initErr == nil) == (joinErr == nil) {
				t.Fatalf("round %d: Init = %v, Join = %v; want exactly one winner", i, initErr, joinErr)
			}
			loser, winner := joinErr, nodelock.OwnerInit
			if initErr != nil {
				loser, winner = initErr, nodelock.OwnerJoin
			}
			var held *nodelock.HeldError
			var busy *fsm.BusyError
			switch {
			case errors.As(loser, &held):
				if held.Owner != winner {
					t.Fatalf("round %d: loser told %q won, want %q", i, held.Owner, winner)
				}
			case errors.As(loser, &busy):
				if string(busy.Running) != winner {
					t.Fatalf("round %d: loser told %q runs, want %q", i, busy.Running, winner)
				}
			default:
				t.Fatalf("round %d: loser got %v, want HeldError or BusyError", i, loser)
			}
			waitState(t, h.Node, fsm.Running)
			if got := h.Status().LockedBy; got != winner {
				t.Fatalf("round %d: lock held by %q, want %q", i, got, winner)
			}
		}()
	}
}

func TestLockedNodeNeverServesMaintenanceAgain(t *testing.T) {
	c := testcluster.New(t)
	root := t.TempDir()
	h := start(t, root, nil)
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	h2 := start(t, root, nil)
	waitState(t, h2.Node, fsm.Running)
	mtls, maint := h2.api.state()
	if !mtls || maint != 0 {
		t.Errorf("restarted locked node: mtls=%v, maintenance switches=%d; want mTLS only", mtls, maint)
	}
	if err := h2.Init(context.Background(), c.ControlPlaneYAML, nil); err == nil {
		t.Error("a second Init on a locked node succeeded")
	}
}

func TestResumeSkipsFinishedTasks(t *testing.T) {
	c := testcluster.New(t)
	root := t.TempDir()
	state := paths.Paths{Root: root}.State()
	l, err := nodelock.Open(state, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A power cut after store-identity finished: the lock and config are on disk, the task recorded.
	if err := l.Take(nodelock.OwnerInit, c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	h0 := start(t, t.TempDir(), nil) // borrow a node to write a key the way store-identity does
	h0.stateDir = state
	if err := h0.storeIdentity(context.Background()); err != nil {
		t.Fatal(err)
	}
	keyBefore, _ := os.ReadFile(filepath.Join(state, "pki", identityKey))
	l.MarkDone("store-identity")

	h := start(t, root, nil)
	waitState(t, h.Node, fsm.Running)
	var outcomes []string
	for _, e := range h.bus.History(0) {
		if e.Task == "store-identity" || e.Task == "machine-certificate" {
			outcomes = append(outcomes, e.Task+":"+e.Outcome)
		}
	}
	want := "store-identity:skipped machine-certificate:started machine-certificate:done"
	if got := join(outcomes); got != want {
		t.Errorf("resumed Init ran %q, want %q", got, want)
	}
	keyAfter, _ := os.ReadFile(filepath.Join(state, "pki", identityKey))
	if string(keyBefore) != string(keyAfter) {
		t.Error("the node key changed on resume: store-identity ran twice")
	}
}

// fakeTickets fails a few times, then hands out a ticket made for the asking node.
type fakeTickets struct {
	c       *testcluster.Cluster
	t       testing.TB
	failFor int32
	calls   atomic.Int32
}

func (f *fakeTickets) RequestTicket(ctx context.Context, addr string, req *machine.TicketRequest) (*machine.JoinTicket, error) {
	if n := f.calls.Add(1); n <= f.failFor {
		return nil, errors.New("connection refused")
	}
	return f.c.Ticket(f.t, req.MachinePublicKey), nil
}

func TestJoinClientRetriesUntilItJoins(t *testing.T) {
	c := testcluster.New(t)
	ft := &fakeTickets{c: c, t: t, failFor: 2}
	h := start(t, t.TempDir(), func(o *Options) { o.JoinAddr, o.JoinToken, o.JoinCA, o.Tickets = "cp:50001", "tok", "ab12", ft })
	deadline := time.Now().Add(20 * time.Second)
	for h.Status().LockedBy == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	waitState(t, h.Node, fsm.Running)
	if got := h.Status().LockedBy; got != nodelock.OwnerJoin {
		t.Fatalf("locked by %q, want join", got)
	}
	if n := ft.calls.Load(); n != 3 {
		t.Errorf("join client asked %d times, want 3 (two failures, then success)", n)
	}
	failures := 0
	for _, e := range h.bus.History(0) {
		if e.Kind == events.KindJoin && e.Outcome == events.Failed {
			failures++
		}
	}
	if failures != 2 {
		t.Errorf("%d failed join attempts reported as events, want 2", failures)
	}
}

func TestInitStopsTheJoinClient(t *testing.T) {
	c := testcluster.New(t)
	ft := &fakeTickets{c: c, t: t, failFor: 1 << 30}
	h := start(t, t.TempDir(), func(o *Options) { o.JoinAddr, o.JoinCA, o.Tickets = "cp:50001", "ab12", ft })
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	n := ft.calls.Load()
	time.Sleep(2500 * time.Millisecond) // longer than the first backoff
	if m := ft.calls.Load(); m != n {
		t.Errorf("join client kept asking after Init took the lock (%d → %d calls)", n, m)
	}
}

// cairnctl reset --no-reboot: the volumes are wiped and the node powers off instead of rebooting.
func TestResetNoRebootPowersOff(t *testing.T) {
	c := testcluster.New(t)
	h := start(t, t.TempDir(), nil)
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if err := h.Reset(context.Background(), ResetOptions{Wipe: []string{"state", "ephemeral"}, NoReboot: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Finished():
	case <-time.After(10 * time.Second):
		t.Fatalf("reset --no-reboot did not power off; state %s", h.Status().State)
	}
	if r, p := h.sys.reboots.Load(), h.sys.poweroffs.Load(); r != 0 || p != 1 {
		t.Errorf("reset --no-reboot: %d reboots, %d power-offs; want 0 and 1", r, p)
	}
	if h.Status().LockedBy != "" {
		t.Error("lock still held after reset --no-reboot")
	}
}

func TestSandboxRebootShutdownReset(t *testing.T) {
	c := testcluster.New(t)
	h := start(t, t.TempDir(), nil)
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)

	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if h.sys.reboots.Load() != 1 {
		t.Errorf("reboots = %d, want 1", h.sys.reboots.Load())
	}
	if st := h.Status(); st.LockedBy != nodelock.OwnerInit {
		t.Errorf("after reboot: %+v, want the lock kept", st)
	}

	if err := h.Reset(context.Background(), ResetOptions{Wipe: []string{"state", "ephemeral"}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Boot)
	// A sandbox node enters Boot, then boots in-process, which turns its API back to maintenance mode.
	waitAPI(t, h.api, false)
	if h.Status().LockedBy != "" {
		t.Error("lock still held after reset")
	}
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatalf("Init after reset = %v", err)
	}
	waitState(t, h.Node, fsm.Running)

	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Finished():
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown did not finish")
	}
	if err := h.Reboot(context.Background()); err == nil {
		t.Error("Reboot after Shutdown succeeded")
	}
}

// memTempDir is a temp dir on tmpfs when there is one: the race test fsyncs thousands of times and
// measures the lock's logic, not the disk.
func memTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("/dev/shm", "cairn-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func itoa(i int) string { return string(rune('a'+i%26)) + time.Duration(i).String() }

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// TestRunningHookStopsWithThePowerSequence checks that the Running work starts with each entry into
// Running and has ended before a reboot or shutdown stops the services under it.
func TestRunningHookStopsWithThePowerSequence(t *testing.T) {
	c := testcluster.New(t)
	var starts, running atomic.Int32
	h := start(t, t.TempDir(), func(o *Options) {
		o.Hooks.Running = func(ctx context.Context, _ *config.MachineConfig) {
			starts.Add(1)
			running.Add(1)
			defer running.Add(-1)
			<-ctx.Done()
		}
		o.Hooks.Stop = func(fsm.Sequence) []sequence.Task {
			return []sequence.Task{{Name: "stop-services", Run: func(context.Context) error {
				if n := running.Load(); n != 0 {
					return fmt.Errorf("%d Running hooks still run while the services stop", n)
				}
				return nil
			}}}
		}
	})
	initThenReboot(t, h, c.ControlPlaneYAML)
	if st := h.Status(); st.LastError != "" {
		t.Fatalf("reboot failed: %s", st.LastError)
	}
	if err := h.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Finished():
	case <-time.After(5 * time.Second):
		t.Fatalf("shutdown did not finish: %s", h.Status().LastError)
	}
	if got := starts.Load(); got != 2 {
		t.Errorf("Running hook started %d times, want 2 (after Init, after the reboot)", got)
	}
	if got := running.Load(); got != 0 {
		t.Errorf("%d Running hooks still run after shutdown", got)
	}
}

// TestRebootRenewsTheMachineCertificate checks that a control plane booting with less than a third of
// its machine-API certificate's life left comes up with a new one, and one booting earlier keeps it.
func TestRebootRenewsTheMachineCertificate(t *testing.T) {
	c := testcluster.New(t)
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	set(time.Now())
	root := t.TempDir()
	h := start(t, root, func(o *Options) { o.Now = func() time.Time { return *now.Load() } })
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	certPath := filepath.Join(h.o.Paths.State(), "pki", identityCert)
	notAfter := func() time.Time {
		data, err := os.ReadFile(certPath)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := pki.ParseCert(data)
		if err != nil {
			t.Fatal(err)
		}
		return cert.NotAfter
	}
	first := notAfter()

	for _, step := range []struct {
		after   time.Duration
		renewed bool
	}{{30 * 24 * time.Hour, false}, {270 * 24 * time.Hour, true}} {
		set(first.Add(-pki.LeafValidity + step.after))
		before := notAfter()
		if err := h.Reboot(context.Background()); err != nil {
			t.Fatal(err)
		}
		waitState(t, h.Node, fsm.Running)
		if st := h.Status(); st.LastError != "" {
			t.Fatalf("reboot %s after issue: %s", step.after, st.LastError)
		}
		if got := notAfter(); got.Equal(before) == step.renewed {
			t.Errorf("reboot %s after issue: certificate expiry %s → %s, renewed = %t, want %t",
				step.after, before, got, !got.Equal(before), step.renewed)
		}
	}
}
