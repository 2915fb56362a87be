package workload

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/cairn-os/cairn/machined/internal/etcdops"
	"github.com/cairn-os/cairn/machined/internal/node"
)

// restoreEtcd restores the cluster's state from the etcd snapshot an Init was given (cairnctl init
// --etcd-snapshot), into a new single-member etcd named after this node, before etcd first starts. The
// snapshot was kept in STATE with the node lock; it is removed once restored.
func (w *Workload) restoreEtcd(context.Context) error {
	if w.StateDir == nil {
		return nil
	}
	snap := filepath.Join(w.StateDir(), node.EtcdSnapshotFile)
	if _, err := os.Stat(snap); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	r := w.Renderer()
	name, _ := w.Identity()
	err := etcdops.Restore(snap, r.Layout().EtcdData(), etcdops.Member{Name: name, PeerURL: r.EtcdPeerURL()})
	if err != nil && !errors.Is(err, etcdops.ErrDataExists) {
		return err
	}
	w.Log.Info("etcd restored from the snapshot given to Init", "member", name)
	return os.Remove(snap)
}
