package workload

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/kube"
)

// importImages imports the bundle into containerd: every image into Kubernetes' namespace, and the
// kubelet's into Cairn's own. An earlier boot's import (EPHEMERAL kept) is not repeated.
func (w *Workload) importImages(ctx context.Context) error {
	cli := w.containerdClient()
	imgs := kube.DefaultImages()
	k8s := []string{imgs.APIServer, imgs.ControllerManager, imgs.Scheduler, imgs.Etcd, imgs.Pause}
	if !containerd.HasImages(ctx, cli, containerd.NamespaceK8s, k8s) {
		start := time.Now()
		names, err := containerd.ImportBundle(ctx, cli, w.Bundle.Images, containerd.NamespaceK8s, nil)
		if err != nil {
			return err
		}
		w.Log.Info("images imported", "namespace", containerd.NamespaceK8s, "count", len(names), "took", time.Since(start).Round(time.Millisecond))
	}
	if !containerd.HasImages(ctx, cli, containerd.NamespaceCairn, []string{imgs.Kubelet}) {
		if _, err := containerd.ImportBundle(ctx, cli, w.Bundle.Images, containerd.NamespaceCairn,
			func(name string) bool { return name == imgs.Kubelet }); err != nil {
			return err
		}
	}
	return nil
}

// killPods kills every task in Kubernetes' namespace: the pods' processes outlive containerd (their
// shims are not its children), and would keep the volumes busy.
func (w *Workload) killPods(ctx context.Context) {
	cli := w.containerdClient()
	if cli == nil {
		return
	}
	nctx := namespaces.WithNamespace(ctx, containerd.NamespaceK8s)
	ctrs, err := cli.Containers(nctx)
	if err != nil {
		w.Log.Warn("list pods' containers", "error", err)
		return
	}
	for _, c := range ctrs {
		task, err := c.Task(nctx, nil)
		if err != nil {
			continue
		}
		if err := task.Kill(nctx, syscall.SIGKILL, client.WithKillAll); err != nil {
			w.Log.Warn("kill container", "id", c.ID(), "error", err)
			continue
		}
		if st, err := task.Wait(nctx); err == nil {
			select {
			case <-st:
			case <-time.After(5 * time.Second):
			}
		}
		if _, err := task.Delete(nctx); err != nil {
			w.Log.Warn("delete task", "id", c.ID(), "error", fmt.Sprint(err))
		}
	}
}
