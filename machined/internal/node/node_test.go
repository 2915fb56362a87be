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

	"github.com/google/go-cmp/cmp"
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
	if mtls, _ := h.api.state(); mtls {
		t.Error("API still mTLS after reset")
	}
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
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
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

// TestNetworkAndTimeOnEveryStart checks that the machine config's network and then its clock are set up
// in Init and again at each start; in Init only once the API answers with mutual TLS (a node never
// changes its addresses while it still takes the bootstrap token).
func TestNetworkAndTimeOnEveryStart(t *testing.T) {
	c := testcluster.New(t)
	var mu sync.Mutex
	var calls []string
	h := start(t, t.TempDir(), func(o *Options) {
		api := o.API.(*fakeAPI)
		record := func(name string) func(context.Context, *config.MachineConfig) error {
			return func(_ context.Context, cfg *config.MachineConfig) error {
				mtls, _ := api.state()
				mu.Lock()
				calls = append(calls, fmt.Sprintf("%s mtls=%t", name, mtls))
				mu.Unlock()
				if cfg == nil || cfg.Cluster.Name != "test" {
					t.Errorf("%s hook got config %+v, want the node's", name, cfg)
				}
				return nil
			}
		}
		o.Hooks.Network, o.Hooks.Time = record("network"), record("time")
	})
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	mu.Lock()
	defer mu.Unlock()
	// After the in-process reboot the fake API still says mutual TLS; the start's order shows in its tasks.
	want := []string{"network mtls=true", "time mtls=true", "network mtls=true", "time mtls=true"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("hook calls (-want +got):\n%s", diff)
	}
	var order []string
	for _, e := range h.bus.History(0) {
		if e.Kind == events.KindTask && e.Outcome == events.Started && e.Sequence == string(fsm.SeqStart) {
			order = append(order, e.Task)
		}
	}
	if len(order) < 4 {
		t.Fatalf("start tasks = %v", order)
	}
	if diff := cmp.Diff([]string{"network", "time", "machine-certificate-renewal", "api-mutual-tls"}, order[:4]); diff != "" {
		t.Errorf("the start's first tasks (-want +got):\n%s", diff)
	}
}

// TestSelfJoinNeedsAPinnedCA: a node told to join by itself without cairn.joinca= never asks for a ticket
// and says why; with cairn.joinca=insecure it asks, and status warns that it does not know whom it joins.
func TestSelfJoinNeedsAPinnedCA(t *testing.T) {
	for _, tc := range []struct {
		ca        string
		wantAsked bool
		wantErr   string
		wantWarn  string
	}{
		{ca: "", wantErr: "cairn.join= is set without cairn.joinca="},
		{ca: JoinCAInsecure, wantAsked: true, wantWarn: "joins cp:50001 without checking whom it talks to (cairn.joinca=insecure)"},
	} {
		t.Run("joinca="+tc.ca, func(t *testing.T) {
			ft := &fakeTickets{failFor: 1 << 30} // never a ticket: the node stays in Boot
			h := start(t, t.TempDir(), func(o *Options) { o.JoinAddr, o.JoinToken, o.JoinCA, o.Tickets = "cp:50001", "tok", tc.ca, ft })
			if tc.wantAsked {
				deadline := time.Now().Add(5 * time.Second)
				for ft.calls.Load() == 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			} else {
				time.Sleep(50 * time.Millisecond)
			}
			if asked := ft.calls.Load() > 0; asked != tc.wantAsked {
				t.Errorf("asked for a ticket = %t, want %t", asked, tc.wantAsked)
			}
			st := h.Status()
			if st.State != fsm.Boot || !strings.Contains(st.LastError, tc.wantErr) || (tc.wantErr == "" && st.LastError != "") {
				t.Errorf("status = %s, last error %q; want Boot and %q", st.State, st.LastError, tc.wantErr)
			}
			if got := strings.Join(st.Warnings, "; "); got != tc.wantWarn {
				t.Errorf("warnings = %q, want %q", got, tc.wantWarn)
			}
		})
	}
}

// memberTickets is fakeTickets with a control plane in the ticket's members, where a worker asks for its
// certificate renewals.
type memberTickets struct{ *fakeTickets }

func (m memberTickets) RequestTicket(ctx context.Context, addr string, req *machine.TicketRequest) (*machine.JoinTicket, error) {
	t, err := m.fakeTickets.RequestTicket(ctx, addr, req)
	if t != nil {
		t.Members = []*machine.Member{{Name: "cp1", Address: "10.5.0.2", ControlPlane: true}}
	}
	return t, err
}

// fakeRenewer signs a renewal with the cluster's machine CA, for the key of the certificate it is sent.
type fakeRenewer struct {
	c     *testcluster.Cluster
	t     testing.TB
	now   func() time.Time
	asked []string
}

func (f *fakeRenewer) RenewCertificate(_ context.Context, addr string, machineCA []byte, req *machine.RenewRequest) ([]byte, error) {
	f.asked = append(f.asked, addr)
	old, err := pki.ParseCert(req.MachineCert)
	if err != nil {
		return nil, err
	}
	der, err := f.c.MachineCA(f.t).SignPublic(pki.Request{CommonName: old.Subject.CommonName, Client: true, Server: true,
		DNSNames: old.DNSNames}, old.PublicKey, f.now())
	if err != nil {
		return nil, err
	}
	return pki.EncodeCert(der), nil
}

// TestWorkerRenewsItsCertificateThroughAControlPlane: a joined worker booting with less than a third of
// its machine-API certificate's life left asks a control plane of its ticket for a new one and keeps it.
func TestWorkerRenewsItsCertificateThroughAControlPlane(t *testing.T) {
	c := testcluster.New(t)
	var now atomic.Pointer[time.Time]
	set := func(t time.Time) { now.Store(&t) }
	set(time.Now())
	clock := func() time.Time { return *now.Load() }
	renewer := &fakeRenewer{c: c, t: t, now: clock}
	h := start(t, t.TempDir(), func(o *Options) {
		o.Now = clock
		o.JoinAddr, o.JoinToken, o.JoinCA = "cp:50001", "tok", "ab12"
		o.Tickets, o.Renewer = memberTickets{&fakeTickets{c: c, t: t}}, renewer
	})
	waitState(t, h.Node, fsm.Running)
	certPath := filepath.Join(h.o.Paths.State(), "pki", identityCert)
	data, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := pki.ParseCert(data)
	set(first.NotAfter.Add(-30 * 24 * time.Hour))
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	data, _ = os.ReadFile(certPath)
	renewed, err := pki.ParseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	// Its config's join endpoints come first, then the control planes its ticket named.
	if got := h.joinServices(); len(got) != 2 || got[1] != "10.5.0.2" {
		t.Errorf("join services = %v, want the config's then 10.5.0.2", got)
	}
	if !renewed.NotAfter.After(first.NotAfter) || len(renewer.asked) != 1 {
		t.Errorf("certificate expiry %s → %s, control planes asked %v; want a later expiry from the first", first.NotAfter, renewed.NotAfter, renewer.asked)
	}
}

// TestLockReachesTheDiskBeforeClusterData pins the order a power cut relies on: in Init the lock, taken in
// RAM, moves to STATE right after the volumes are formatted and mounted, before any task that writes
// cluster data (the workload: etcd, certificates, the kubelet). A cut between the format and the move
// leaves formatted, empty volumes labelled for the cluster and no lock: the node boots into maintenance,
// and the same config's Init keeps those volumes (the plan keeps a disk with this cluster's label; see
// disk/apply's TestIntegrationFormatThenKeep) instead of formatting them again.
func TestLockReachesTheDiskBeforeClusterData(t *testing.T) {
	c := testcluster.New(t)
	h := start(t, t.TempDir(), func(o *Options) {
		o.Hooks.Storage = func(_ *config.MachineConfig, seq fsm.Sequence, _ func(string)) []sequence.Task {
			if seq == fsm.SeqBoot {
				return nil
			}
			return []sequence.Task{{Name: "format-volumes", Run: func(context.Context) error { return nil }}}
		}
		o.Hooks.Workload = func(*config.MachineConfig, fsm.Sequence) []sequence.Task {
			return []sequence.Task{{Name: "etcd-data", Run: func(context.Context) error { return nil }}}
		}
	})
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	var order []string
	for _, e := range h.bus.History(0) {
		if e.Kind == events.KindTask && e.Outcome == events.Started && e.Sequence == string(fsm.SeqInit) {
			order = append(order, e.Task)
		}
	}
	at := func(name string) int {
		for i, n := range order {
			if n == name {
				return i
			}
		}
		t.Fatalf("Init ran no task %s: %v", name, order)
		return -1
	}
	if f, s, w := at("format-volumes"), at("state-on-disk"), at("etcd-data"); s != f+1 || w < s {
		t.Errorf("Init's tasks %v: want state-on-disk right after the volumes and before the workload", order)
	}
}
