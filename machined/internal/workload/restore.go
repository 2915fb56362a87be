package workload

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/etcdops"
	"github.com/cairn-os/cairn/machined/internal/node"
)

// restoreEtcd restores the cluster's state from the etcd snapshot an Init was given (cairnctl init
// --etcd-snapshot), into a new single-member etcd named after this node, before etcd first starts. The
// snapshot was kept in STATE with the node lock; it is removed once restored.
func (w *Workload) restoreEtcd(ctx context.Context) error {
	if w.StateDir == nil {
		return nil
	}
	snap := filepath.Join(w.StateDir(), node.EtcdSnapshotFile)
	if _, err := os.Stat(snap); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	r := w.Renderer()
	name, _ := w.Identity()
	data := r.Layout().EtcdData()
	start := time.Now()
	err := etcdops.Restore(ctx, w.etcdutl(snap, data), snap, data, etcdops.Member{Name: name, PeerURL: r.EtcdPeerURL()})
	if err != nil && !errors.Is(err, etcdops.ErrDataExists) {
		return err
	}
	w.Log.Info("etcd restored from the snapshot given to Init", "member", name, "took", time.Since(start).Round(time.Millisecond))
	return os.Remove(snap)
}

// etcdutlPath is where the bundle's etcd image has etcdutl: a link to etcd, which is etcdutl by that name.
const etcdutlPath = "/usr/local/bin/etcdutl"

// etcdutl runs the etcd image's etcdutl as a one-shot container that sees the snapshot file and the
// data directory at their host paths.
func (w *Workload) etcdutl(snapshotFile, dataDir string) etcdops.Etcdutl {
	return func(ctx context.Context, args ...string) error {
		cli := w.containerdClient()
		if cli == nil {
			return errors.New("etcdutl: containerd is not running")
		}
		return containerd.OneShot{
			Client:    cli,
			Namespace: containerd.NamespaceCairn,
			ID:        "etcdutl",
			Image:     w.Renderer().Images().Etcd,
			Binds:     []string{snapshotFile, dataDir},
		}.Run(ctx, append([]string{etcdutlPath}, args...)...)
	}
}
