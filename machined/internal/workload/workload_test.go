package workload

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/fsm"
)

// TestHookOrder checks the orderings that keep a node's data safe, for each kind of node.
func TestHookOrder(t *testing.T) {
	type rule struct{ before, after string }
	tests := []struct {
		name    string
		typ     string
		seq     fsm.Sequence
		rules   []rule
		without []string
	}{
		{"first control plane", config.TypeControlPlane, fsm.SeqInit,
			[]rule{{"etcd-restore", "etcd-manifest"}, {"etcd-manifest", "kubelet"}, {"kubernetes-pki", "kubelet"},
				{"kubernetes-pki", "certificates"}, {"certificates", "kubelet"},
				{"apiserver-ready", "bootstrap-objects"}, {"node-ready", "join-service"},
				{"control-plane-manifests", "kubelet"}, {"apiserver-ready", "controller-manifests"},
				{"controller-manifests", "pod-network"}, {"discovery-names", "kubelet"},
				{"etcd-healthy", "vip"}, {"apiserver-ready", "vip"}, {"vip", "addons"}, {"etcd-healthy", "etcd-name"},
				{"opt-dir", "containerd"}},
			[]string{"etcd-promote", "worker-files"}},
		// A joining member must not restore a snapshot (it would start a cluster of its own), and its API
		// server, which talks to the local member alone, waits until that member votes.
		{"joining control plane", config.TypeControlPlane, fsm.SeqJoin,
			[]rule{{"etcd-manifest", "kubelet"}, {"kubelet", "etcd-promote"}, {"etcd-promote", "etcd-healthy"},
				{"etcd-healthy", "control-plane-manifests"}, {"node-ready", "join-service"},
				{"apiserver-ready", "controller-manifests"}, {"controller-manifests", "pod-network"},
				{"discovery-names", "kubelet"}, {"apiserver-ready", "vip"}, {"etcd-healthy", "etcd-name"}},
			[]string{"etcd-restore", "bootstrap-objects", "worker-files"}},
		// Certificates are renewed on every boot, before the static pods start with them.
		{"control plane booting after a join", config.TypeControlPlane, fsm.SeqStart,
			// A restarting control plane stands for the VIP only once its API server answers: it must not
			// take the address from a holder that serves the API (make e2e-ha saw that).
			[]rule{{"etcd-manifest", "kubelet"}, {"certificates", "control-plane-manifests"}, {"certificates", "kubelet"},
				{"apiserver-ready", "vip"}, {"etcd-healthy", "etcd-name"}},
			[]string{"etcd-promote"}},
		{"worker", config.TypeWorker, fsm.SeqJoin,
			// The kubelet bootstraps through api.internal.<cluster>: the name must be there first.
			[]rule{{"worker-files", "kubelet"}, {"kubelet", "node-ready"}, {"discovery-names", "kubelet"}, {"opt-dir", "containerd"}},
			[]string{"kubernetes-pki", "certificates", "etcd-manifest", "etcd-promote", "control-plane-manifests",
				"controller-manifests", "join-service", "etcd-name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &config.MachineConfig{Machine: config.Machine{Type: tc.typ}}
			var names []string
			for _, task := range (&Workload{}).Hook(c, tc.seq) {
				names = append(names, task.Name)
			}
			for _, r := range tc.rules {
				b, a := slices.Index(names, r.before), slices.Index(names, r.after)
				if b < 0 || a < 0 || b > a {
					t.Errorf("%s must come before %s: tasks %v", r.before, r.after, names)
				}
			}
			for _, n := range tc.without {
				if slices.Contains(names, n) {
					t.Errorf("task %s must not run here: tasks %v", n, names)
				}
			}
		})
	}
}

// TestAfterSettled checks the warm-up's wait for the add-ons: it goes on as soon as they are up, goes on
// anyway once the limit has passed, and gives up with the context.
func TestAfterSettled(t *testing.T) {
	tests := []struct {
		name      string
		upAt      int // the call to up that first reports true; 0 for never
		cancelled bool
		want      bool
		wantCalls int // at least
	}{
		{"up at once", 1, false, true, 1},
		{"up at the third look", 3, false, true, 3},
		{"never up: goes on at the limit", 0, false, true, 2},
		{"context ended", 0, true, false, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			calls := 0
			up := func(context.Context) bool {
				calls++
				return tc.upAt > 0 && calls >= tc.upAt
			}
			if got := afterSettled(ctx, up, time.Millisecond, 50*time.Millisecond); got != tc.want {
				t.Errorf("afterSettled() = %v, want %v", got, tc.want)
			}
			if calls < tc.wantCalls || (tc.upAt > 0 && calls != tc.upAt) {
				t.Errorf("up was asked %d times, want %d", calls, max(tc.upAt, tc.wantCalls))
			}
		})
	}
}

// TestWarmOpenAPIWithoutKubernetes checks that a node with no Kubernetes set up (sandbox mode without a
// payload reaches Running so) leaves the warm-up at once: its add-on checks need the rendered config.
func TestWarmOpenAPIWithoutKubernetes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Workload{}).warmOpenAPIWhenSettled(ctx)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("warmOpenAPIWhenSettled waited on a node without Kubernetes")
	}
}
