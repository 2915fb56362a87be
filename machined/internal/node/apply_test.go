package node

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/configapply"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// reconfigurer records what the workload was asked to apply, and fails when told to.
type reconfigurer struct {
	mu    sync.Mutex
	seen  []string // the kubelet's maxPods of each config applied
	fail  int32    // fail when asked to apply this maxPods
	paths [][]string
}

func (r *reconfigurer) hook(o *Options) {
	o.Hooks.Reconfigure = func(_ context.Context, c *config.MachineConfig, changes []config.Change, _ func(string)) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.seen = append(r.seen, itoa32(c.Machine.Kubelet.MaxPods))
		var p []string
		for _, ch := range changes {
			p = append(p, ch.Path)
		}
		r.paths = append(r.paths, p)
		if r.fail != 0 && c.Machine.Kubelet.MaxPods == r.fail {
			return errors.New("kubelet did not come back")
		}
		return nil
	}
}

func (r *reconfigurer) applied() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func itoa32(i int32) string { return strconv.Itoa(int(i)) }

// runningNode inits a sandbox node to Running with the recorder as its workload.
func runningNode(t *testing.T, root string, r *reconfigurer) (*harness, *testcluster.Cluster) {
	t.Helper()
	c := testcluster.New(t)
	h := start(t, root, r.hook)
	if err := h.Init(context.Background(), c.ControlPlaneYAML, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	return h, c
}

func withMaxPods(t *testing.T, raw []byte, n int32) []byte {
	t.Helper()
	c, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	c.Machine.Kubelet.MaxPods = n
	out, err := config.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func storedMaxPods(t *testing.T, h *harness) int32 {
	t.Helper()
	raw, err := h.lock.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return c.Machine.Kubelet.MaxPods
}

func apply(h *harness, req ApplyRequest) ([]string, error) {
	var lines []string
	req.Client = "admin-test"
	err := h.ApplyConfig(context.Background(), req, func(s string) { lines = append(lines, s) })
	return lines, err
}

func TestApplyLiveStoresAndRecords(t *testing.T) {
	r := &reconfigurer{}
	h, c := runningNode(t, t.TempDir(), r)

	// Before any change the history shows the config of Init, in force.
	if list, current, err := h.ConfigHistory(); err != nil || len(list) != 1 || list[0].Client != "init" || list[0].Generation != 1 || list[0].SHA256 != current {
		t.Errorf("history before a change = %+v (current %s), %v; want Init's config as generation 1", list, current, err)
	}

	lines, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 50), Mode: configapply.Auto, DryRun: true})
	if err != nil || storedMaxPods(t, h) != 0 || len(r.applied()) != 0 {
		t.Fatalf("dry run: err %v, stored maxPods %d, applied %v: want nothing changed", err, storedMaxPods(t, h), r.applied())
	}
	if !strings.Contains(strings.Join(lines, "\n"), "machine.kubelet.maxPods: live") {
		t.Errorf("dry run output %q does not say the path applies live", lines)
	}

	if _, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 50), Mode: configapply.Auto}); err != nil {
		t.Fatal(err)
	}
	if got := storedMaxPods(t, h); got != 50 {
		t.Errorf("stored maxPods = %d, want 50", got)
	}
	if h.Machine().Machine.Kubelet.MaxPods != 50 {
		t.Error("the config in force is not the applied one")
	}
	if diff := cmp.Diff([][]string{{"machine.kubelet.maxPods"}}, r.paths); diff != "" {
		t.Errorf("paths handed to the workload (-want +got):\n%s", diff)
	}
	list, current, err := h.ConfigHistory()
	if err != nil || len(list) != 2 || list[0].Client != "admin-test" || list[0].Generation != 2 || list[1].Client != "init" || list[0].SHA256 != current {
		t.Errorf("history = %+v (current %s), %v; want the applied config over Init's", list, current, err)
	}

	// Rollback applies Init's config again.
	if _, err := apply(h, ApplyRequest{Rollback: true, Mode: configapply.Auto}); err != nil {
		t.Fatal(err)
	}
	if got := storedMaxPods(t, h); got != 0 {
		t.Errorf("stored maxPods after rollback = %d, want 0 (Init's)", got)
	}
}

func TestApplyRefusesImmutable(t *testing.T) {
	r := &reconfigurer{}
	h, c := runningNode(t, t.TempDir(), r)
	cfg, _ := config.Parse(c.ControlPlaneYAML)
	cfg.Cluster.Network.PodCIDR = "10.250.0.0/16"
	cfg.Machine.Kubelet.MaxPods = 50
	raw, _ := config.Marshal(cfg)
	_, err := apply(h, ApplyRequest{Config: raw, Mode: configapply.Auto})
	var refused *configapply.Refusal
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "cluster.network.podCIDR") {
		t.Fatalf("ApplyConfig(podCIDR changed) = %v, want a refusal naming cluster.network.podCIDR", err)
	}
	if storedMaxPods(t, h) != 0 || len(r.applied()) != 0 {
		t.Error("a refused config changed something")
	}
}

func TestApplyFailureIsUndone(t *testing.T) {
	r := &reconfigurer{fail: 7}
	h, c := runningNode(t, t.TempDir(), r)
	_, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 7), Mode: configapply.Auto})
	if err == nil || !strings.Contains(err.Error(), "previous config was put back") {
		t.Fatalf("ApplyConfig(failing) = %v, want the failure and the undo", err)
	}
	if diff := cmp.Diff([]string{"7", "0"}, r.applied()); diff != "" {
		t.Errorf("configs applied (-want +got):\n%s", diff)
	}
	if storedMaxPods(t, h) != 0 || h.Machine().Machine.Kubelet.MaxPods != 0 {
		t.Error("the failed config was kept")
	}
}

func TestApplyTry(t *testing.T) {
	r := &reconfigurer{}
	h, c := runningNode(t, t.TempDir(), r)
	timers := make(chan func(), 4)
	h.trial.AfterFunc = func(_ time.Duration, f func()) func() bool { timers <- f; return func() bool { return true } }

	// Not confirmed: undone when the timer fires, and never stored.
	if _, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 30), Mode: configapply.Try}); err != nil {
		t.Fatal(err)
	}
	if h.Machine().Machine.Kubelet.MaxPods != 30 || storedMaxPods(t, h) != 0 {
		t.Fatalf("on trial: in force %d, stored %d; want 30 in force, 0 stored", h.Machine().Machine.Kubelet.MaxPods, storedMaxPods(t, h))
	}
	(<-timers)()
	if h.Machine().Machine.Kubelet.MaxPods != 0 {
		t.Errorf("after the timeout the config in force has maxPods %d, want the stored 0", h.Machine().Machine.Kubelet.MaxPods)
	}
	if _, err := apply(h, ApplyRequest{Confirm: true}); !errors.As(err, new(NoTrialError)) {
		t.Errorf("confirm after the undo = %v, want NoTrialError", err)
	}

	// Confirmed: stored.
	if _, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 40), Mode: configapply.Try}); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(h, ApplyRequest{Confirm: true}); err != nil {
		t.Fatal(err)
	}
	if got := storedMaxPods(t, h); got != 40 {
		t.Errorf("stored maxPods after confirm = %d, want 40", got)
	}
}

func TestApplyRebootAndStaged(t *testing.T) {
	root := t.TempDir()
	r := &reconfigurer{}
	h, c := runningNode(t, root, r)

	// staged: nothing now; in force from the next boot.
	if _, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 60), Mode: configapply.Staged}); err != nil {
		t.Fatal(err)
	}
	if storedMaxPods(t, h) != 0 || h.Machine().Machine.Kubelet.MaxPods != 0 || len(r.applied()) != 0 {
		t.Fatal("a staged config changed the running node")
	}
	// A hostname needs a reboot: auto stores and reboots (in-process, in sandbox mode).
	cfg, _ := config.Parse(withMaxPods(t, c.ControlPlaneYAML, 60))
	cfg.Machine.Hostname = "renamed"
	raw, _ := config.Marshal(cfg)
	if _, err := apply(h, ApplyRequest{Config: raw, Mode: configapply.NoReboot}); err == nil {
		t.Fatal("no-reboot accepted a hostname change")
	}
	if _, err := apply(h, ApplyRequest{Config: raw, Mode: configapply.Auto}); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if h.sys.reboots.Load() != 1 {
		t.Errorf("reboots = %d, want 1", h.sys.reboots.Load())
	}
	if st := h.Status(); st.Hostname != "renamed" {
		t.Errorf("hostname after the reboot = %q, want renamed", st.Hostname)
	}

	// The config stored by auto replaced the staged one (the later wins): maxPods 60 and the new name.
	if got := h.Machine().Machine.Kubelet.MaxPods; got != 60 {
		t.Errorf("maxPods after the reboot = %d, want 60", got)
	}
	if _, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 70), Mode: configapply.Staged}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, h.Node, fsm.Running)
	if got := h.Machine().Machine.Kubelet.MaxPods; got != 70 {
		t.Errorf("maxPods after the boot that follows staging = %d, want 70", got)
	}
	if _, ok := h.lock.Staged(); ok {
		t.Error("the staged config is still staged after the boot put it in force")
	}
}

// While another sequence runs, an apply is refused as busy and nothing is applied or undone.
func TestApplyWhileBusy(t *testing.T) {
	r := &reconfigurer{}
	h, c := runningNode(t, t.TempDir(), r)
	hold := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_ = h.locked(context.Background(), fsm.SeqService, func(context.Context) error { close(started); <-hold; return nil })
	}()
	<-started
	defer close(hold)
	_, err := apply(h, ApplyRequest{Config: withMaxPods(t, c.ControlPlaneYAML, 9), Mode: configapply.Auto})
	var busy *fsm.BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("apply while a service sequence runs = %v, want BusyError", err)
	}
	if len(r.applied()) != 0 || storedMaxPods(t, h) != 0 {
		t.Errorf("a refused apply changed something: applied %v", r.applied())
	}
}
