package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/kube"
)

// mountPayload makes the payload available: on a node, checked against the root image's record and
// mounted (once per boot; a sandbox node's payload is a directory already).
func (w *Workload) mountPayload(ctx context.Context) error {
	w.mu.Lock()
	mounted := w.payloadMounted
	w.mu.Unlock()
	if mounted || w.Payload.Mount == nil {
		return nil
	}
	start := time.Now()
	if err := w.Payload.Mount(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	w.payloadMounted = true
	w.mu.Unlock()
	w.Log.Info("payload checked and mounted", "dir", w.Payload.Dir, "took", time.Since(start).Round(time.Millisecond))
	w.prefetchPayload()
	return nil
}

// registerImages makes containerd know the payload's images, every one in Kubernetes' namespace and
// the kubelet's and etcd's in Cairn's own (machined runs the kubelet, and etcdutl for a restore, from
// them), without importing anything (containerd.RegisterPayload), on every boot.
func (w *Workload) registerImages(ctx context.Context) error {
	cli := w.containerdClient()
	sum, err := payloadID(w.Payload.Dir)
	if err != nil {
		return err
	}
	snapshots := filepath.Join(w.Renderer().Layout().ContainerdRoot(), "io.containerd.snapshotter.v1."+containerd.Snapshotter)
	start := time.Now()
	names, err := containerd.RegisterPayload(ctx, cli, w.Payload.Dir, containerd.NamespaceK8s, snapshots, sum, nil)
	if err != nil {
		return err
	}
	own := kube.DefaultImages()
	if _, err := containerd.RegisterPayload(ctx, cli, w.Payload.Dir, containerd.NamespaceCairn, snapshots, sum,
		func(name string) bool { return name == own.Kubelet || name == own.Etcd }); err != nil {
		return err
	}
	w.Log.Info("payload images registered", "count", len(names), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// payloadID names the payload's images: the digest of its image index, which changes with any image.
func payloadID(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, payload.IndexFile))
	if err != nil {
		return "", fmt.Errorf("payload: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// BundledImages are the names of the images the node carries.
func (w *Workload) BundledImages() ([]string, error) {
	ix, err := payload.ReadIndex(w.Payload.Dir)
	if err != nil {
		return nil, err
	}
	return ix.Names(), nil
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
