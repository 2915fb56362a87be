package workload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/oci"

	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

// writeControlPlane writes kube-apiserver's static pod and removes the controller-manager's and the
// scheduler's until the API server is ready (writeControllers; kube.Renderer.APIServerManifest says why).
// They are rewritten on every boot, so a changed setting or version takes effect.
func (w *Workload) writeControlPlane(context.Context) error {
	r := w.Renderer()
	files, err := r.APIServerManifest()
	if err != nil {
		return err
	}
	later, err := r.ControllerManifests()
	if err != nil {
		return err
	}
	for _, f := range later {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return kube.WriteFiles(files)
}

// writeControllers writes the controller-manager's and the scheduler's static pods, once the API server
// they work through is ready.
func (w *Workload) writeControllers(context.Context) error {
	files, err := w.Renderer().ControllerManifests()
	if err != nil {
		return err
	}
	return kube.WriteFiles(files)
}

// writeEtcd writes etcd's static pod, in a new cluster or, on a joined control plane, in the one its
// ticket names (etcd ignores that once its data directory exists). It runs after the ETCD volume is
// mounted (the storage tasks come first in every sequence), and the kubelet cannot start etcd before this
// file exists: etcd never starts on the node's root filesystem by mistake (kops' guard). The guard checks
// what is mounted there at every start (EtcdVolume), not only that a directory exists.
func (w *Workload) writeEtcd(ctx context.Context) error {
	r := w.Renderer()
	if _, err := os.Stat(r.Layout().EtcdData()); err != nil {
		return fmt.Errorf("the etcd volume is not there: %w", err)
	}
	w.mu.Lock()
	cfg := w.cfg
	w.mu.Unlock()
	if w.EtcdVolume != nil && cfg != nil {
		if err := w.EtcdVolume(ctx, cfg); err != nil {
			return err
		}
	}
	f, err := r.EtcdManifest(w.etcdOptions())
	if err != nil {
		return err
	}
	return kube.WriteFiles(kube.Files{f})
}

func (w *Workload) kubeletOptions() kube.KubeletOptions {
	return kube.KubeletOptions{AllowCgroupV1: w.Sandbox && !exists("/sys/fs/cgroup/cgroup.controllers"), Bootstrap: !w.controlPlane()}
}

// startKubelet writes the kubelet's config and runs it as a containerd container.
func (w *Workload) startKubelet(context.Context) error {
	r := w.Renderer()
	opts := w.kubeletOptions()
	cfg, err := r.KubeletConfig(opts)
	if err != nil {
		return err
	}
	if err := kube.WriteFiles(kube.Files{cfg}); err != nil {
		return err
	}
	l := r.Layout()
	for _, d := range []string{l.KubeletDir(), l.PodLogs(), l.Manifests()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	seeded, err := seedKubeletClient(l.KubernetesFile(kube.KubeletConf), l.KubeletCertDir(), w.Now())
	if err != nil {
		return fmt.Errorf("the kubelet's client certificate: %w", err)
	}
	if seeded != "" {
		w.Log.Info("put kubelet.conf's client certificate in the kubelet's store", "file", seeded)
	}
	w.mu.Lock()
	shared := w.shared
	w.mu.Unlock()
	if !shared {
		if err := w.BindShared(l.KubeletDir()); err != nil {
			return err
		}
		w.mu.Lock()
		w.shared = true
		w.mu.Unlock()
	}
	c := r.KubeletContainer(opts)
	w.Services.Start(supervisor.Service{
		Name: "kubelet",
		Runner: &containerd.Container{
			Client:    func() *client.Client { return w.containerdClient() },
			Namespace: containerd.NamespaceCairn,
			ID:        "kubelet",
			Image:     c.Image,
			Spec:      []oci.SpecOpts{c.SpecOpts(exists)},
		},
		Health: kubeletHealthy,
	})
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
