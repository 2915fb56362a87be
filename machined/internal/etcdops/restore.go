package etcdops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// InitialClusterToken is etcd's default, which the static pod does not change; a restored member gets
// the same, so its flags and its data agree.
const InitialClusterToken = "etcd-cluster"

// ErrDataExists says the data directory already holds an etcd member: a restore never overwrites one.
var ErrDataExists = errors.New("etcd data directory already holds a member")

// Member names the single member a restored cluster starts with: this node.
type Member struct {
	Name    string // the node's name (etcd --name)
	PeerURL string // the node's peer URL (kube.Renderer.EtcdPeerURL)
}

// Etcdutl runs etcd's offline tool, etcdutl, with args to completion. machined runs the etcd image's
// (workload: a one-shot container), which is why etcd's storage engine is not linked into machined;
// the tests run the bundle's binary.
type Etcdutl func(ctx context.Context, args ...string) error

// Restore turns a snapshot file (from EtcdSnapshot, whose trailing checksum etcdutl verifies) into
// etcd's data directory dataDir (the ETCD volume, etcd's --data-dir) for a new single-member cluster
// of m, with `etcdutl snapshot restore`. The keys and revisions are the snapshot's; the membership,
// cluster ID and raft log are new.
//
// The member is built in a scratch directory beside it and moved into place by one rename, so an
// interrupted restore leaves nothing etcd would start on, and running it again starts over. It returns
// ErrDataExists if dataDir already holds a member (a resumed Init that finished this step).
func Restore(ctx context.Context, etcdutl Etcdutl, snapshotFile, dataDir string, m Member) error {
	member := filepath.Join(dataDir, "member")
	if _, err := os.Stat(member); err == nil {
		return fmt.Errorf("restore etcd snapshot into %s: %w", dataDir, ErrDataExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore etcd snapshot: %w", err)
	}
	if _, err := os.Stat(snapshotFile); err != nil {
		return fmt.Errorf("restore etcd snapshot: %w", err)
	}
	scratch := filepath.Join(dataDir, ".restore")
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("restore etcd snapshot: remove the last attempt: %w", err)
	}
	err := etcdutl(ctx, "snapshot", "restore", snapshotFile,
		"--data-dir", scratch,
		"--name", m.Name,
		"--initial-cluster", m.Name+"="+m.PeerURL,
		"--initial-cluster-token", InitialClusterToken,
		"--initial-advertise-peer-urls", m.PeerURL)
	if err != nil {
		os.RemoveAll(scratch)
		return fmt.Errorf("restore etcd snapshot %s: %w", snapshotFile, err)
	}
	if err := os.Rename(filepath.Join(scratch, "member"), member); err != nil {
		return fmt.Errorf("restore etcd snapshot: %w", err)
	}
	if err := syncDir(dataDir); err != nil {
		return fmt.Errorf("restore etcd snapshot: %w", err)
	}
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("restore etcd snapshot: remove scratch directory: %w", err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
