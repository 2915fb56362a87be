package node

// Tests of what the sequences do in order: network and time before certificates, the lock on disk before
// cluster data, a self-join's trust, a joined worker's certificate renewal.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

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
	initThenReboot(t, h, c.ControlPlaneYAML)
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

// The lock is measured in every sequence of a locked node, with STATE on its disk; a measurement the TPM
// disagrees with (and the config does not let pass) stops the node before Running.
func TestMeasureLockEveryBoot(t *testing.T) {
	c := testcluster.New(t)
	var mu sync.Mutex
	var dirs []string
	fail := false
	h := start(t, t.TempDir(), func(o *Options) {
		o.Hooks.Measure = func(_ context.Context, cfg *config.MachineConfig, dir string) error {
			mu.Lock()
			defer mu.Unlock()
			if _, err := os.Stat(filepath.Join(dir, nodelock.LockFile)); err != nil {
				t.Errorf("measured before the lock is in STATE (%s): %v", dir, err)
			}
			dirs = append(dirs, cfg.Cluster.ID)
			if fail {
				return errors.New("PCR 15 disagrees")
			}
			return nil
		}
	})
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	mu.Lock()
	fail = true
	mu.Unlock()
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.Status().LastError == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := h.Status(); st.State == fsm.Running || !strings.Contains(st.LastError, "PCR 15 disagrees") {
		t.Errorf("after a disagreeing measurement: %s, last error %q; want stopped before Running with the reason", st.State, st.LastError)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dirs) != 2 {
		t.Errorf("measured %d times, want once at Init and once at the boot after", len(dirs))
	}
}
