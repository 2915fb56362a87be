package workload

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
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
				{"etcd-healthy", "vip"}, {"apiserver-ready", "vip"}, {"vip", "addons"}, {"etcd-healthy", "etcd-name"}},
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
			[]rule{{"worker-files", "kubelet"}, {"kubelet", "node-ready"}, {"discovery-names", "kubelet"}},
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

// TestAlongside checks that the side work has finished when the task returns, and that the task's
// result is the main work's.
func TestAlongside(t *testing.T) {
	mainErr := errors.New("pod network not ready")
	var sideDone atomic.Bool
	run := alongside(
		func(context.Context) error { return mainErr },
		func(context.Context) error {
			time.Sleep(20 * time.Millisecond)
			sideDone.Store(true)
			return errors.New("ignored")
		},
	)
	if err := run(context.Background()); err != mainErr {
		t.Errorf("alongside(main, side)() = %v, want main's %v", err, mainErr)
	}
	if !sideDone.Load() {
		t.Error("alongside returned before its side work finished")
	}
}
