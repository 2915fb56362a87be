//go:build integration

package etcdops

// TestSnapshotAndRestore runs the bundle's etcd for real with throwaway TLS certificates: it writes keys,
// takes a snapshot through Client.Snapshot, restores it with Restore into a new data directory for a
// member of another name and peer URL, starts etcd on that directory and reads the keys back; the new
// cluster has that one member and none of the writes made after the snapshot.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cairn-os/cairn/machined/internal/etcdops/etcdtest"
)

func etcdBinary(t *testing.T) string { return etcdtest.Binary(t) }

// bundleEtcdutl runs the bundle's etcdutl (the etcd binary by that name), as the etcd image does on a node.
func bundleEtcdutl(t *testing.T) Etcdutl {
	t.Helper()
	bin := filepath.Join(filepath.Dir(etcdBinary(t)), "etcdutl")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("the bundle has no etcdutl (make bundle): %v", err)
	}
	return func(ctx context.Context, args ...string) error {
		if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("etcdutl: %w: %s", err, out)
		}
		return nil
	}
}

func freePort(t *testing.T) int { return etcdtest.FreePort(t) }

type etcdProc struct {
	name, clientURL, peerURL string
}

// startEtcd runs etcd on dataDir until the test ends (or stop is called) and waits until it answers.
// peerURL "" picks a free port.
func startEtcd(t *testing.T, bin string, p testPKI, dataDir, name, peerURL string) (*etcdProc, *Client, func()) {
	t.Helper()
	return startMember(t, bin, p, dataDir, name, peerURL, "")
}

// startMember is startEtcd for a member that joins the existing cluster initialCluster (etcd's
// --initial-cluster, this member included); "" starts a new single-member cluster.
func startMember(t *testing.T, bin string, p testPKI, dataDir, name, peerURL, initialCluster string) (*etcdProc, *Client, func()) {
	t.Helper()
	proc := etcdtest.Start(t, etcdtest.Member{Bin: bin, Name: name, DataDir: dataDir, PKI: p, PeerURL: peerURL, InitialCluster: initialCluster})
	e := &etcdProc{name: name, clientURL: proc.ClientURL, peerURL: proc.PeerURL}
	c := &Client{Endpoints: []string{e.clientURL}, CACert: p.CA, Cert: p.ClientCert, Key: p.ClientKey, Timeout: 2 * time.Second}
	start := time.Now()
	ready := func() error { _, err := c.Members(context.Background()); return err }
	if initialCluster != "" {
		// A learner answers status calls only.
		ready = func() error {
			return c.with(context.Background(), func(ctx context.Context, hc *http.Client) error {
				return c.call(ctx, hc, "/v3/maintenance/status", struct{}{}, nil)
			})
		}
	}
	for {
		if err := ready(); err == nil {
			break
		} else if time.Since(start) > time.Minute {
			t.Fatalf("etcd %s did not answer within a minute: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("etcd %s answers at %s after %v", name, e.clientURL, time.Since(start).Round(time.Millisecond))
	return e, c, proc.Stop
}

// kv opens a plain etcd client for the test's own reads and writes.
func kv(t *testing.T, c *Client) *clientv3.Client {
	t.Helper()
	tc, err := c.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

const keys = 200

func TestSnapshotAndRestore(t *testing.T) {
	bin := etcdBinary(t)
	p := newTestPKI(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	first, c1, stop1 := startEtcd(t, bin, p, filepath.Join(t.TempDir(), "etcd1"), "n1", "")
	cli := kv(t, c1)
	for i := 0; i < keys; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/registry/configmaps/default/cm-%03d", i), fmt.Sprint("value ", i)); err != nil {
			t.Fatal(err)
		}
	}
	members, err := c1.Members(ctx)
	if err != nil || len(members) != 1 || members[0].Name != "n1" || members[0].PeerURLs[0] != first.peerURL ||
		members[0].ClientURLs[0] != first.clientURL || members[0].IsLearner {
		t.Fatalf("Members() = %+v, %v, want n1 alone with its URLs", members, err)
	}

	snap := filepath.Join(t.TempDir(), "snapshot.db")
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sum, err := c1.Snapshot(ctx, f)
	if err != nil {
		t.Fatalf("Snapshot() = %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
		t.Fatalf("Snapshot() returned sha256 %s, but the bytes written hash to %x", sum, h)
	}
	t.Logf("snapshot: %d bytes in %v, sha256 %s", len(b), time.Since(start).Round(time.Millisecond), sum)
	if _, err := cli.Put(ctx, "/registry/after-snapshot", "x"); err != nil {
		t.Fatal(err)
	}
	stop1()

	// The new node's ETCD volume: a mount point that is not empty (ext4's lost+found).
	data2 := filepath.Join(t.TempDir(), "etcd2")
	if err := os.MkdirAll(filepath.Join(data2, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data2, 0o700); err != nil {
		t.Fatal(err)
	}
	peer2 := "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	start = time.Now()
	if err := Restore(ctx, bundleEtcdutl(t), snap, data2, Member{Name: "n2", PeerURL: peer2}); err != nil {
		t.Fatalf("Restore() = %v", err)
	}
	t.Logf("restore: %v", time.Since(start).Round(time.Millisecond))
	if _, err := os.Stat(filepath.Join(data2, ".restore")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch directory left behind: %v", err)
	}
	if err := Restore(ctx, bundleEtcdutl(t), snap, data2, Member{Name: "n2", PeerURL: peer2}); !errors.Is(err, ErrDataExists) {
		t.Errorf("Restore() again = %v, want ErrDataExists", err)
	}
	garbage, data3 := filepath.Join(t.TempDir(), "garbage.db"), t.TempDir()
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a bbolt database ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, bundleEtcdutl(t), garbage, data3, Member{Name: "n3", PeerURL: peer2}); err == nil || !strings.Contains(err.Error(), garbage) {
		t.Errorf("Restore(garbage) = %v, want an error naming %s", err, garbage)
	}
	if entries, _ := os.ReadDir(data3); len(entries) != 0 {
		t.Errorf("data directory after a failed restore holds %d entries, want none", len(entries))
	}

	// etcd takes the peer URL from its flags: start it with the one the member was restored with.
	second, c2, _ := startEtcd(t, bin, p, data2, "n2", peer2)
	cli2 := kv(t, c2)
	resp, err := cli2.Get(ctx, "/registry/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != keys {
		t.Errorf("restored cluster has %d keys under /registry/, want %d (and not the one written after the snapshot)", len(resp.Kvs), keys)
	}
	for i, kv := range resp.Kvs {
		if want := fmt.Sprint("value ", i); string(kv.Value) != want {
			t.Errorf("key %s = %q, want %q", kv.Key, kv.Value, want)
			break
		}
	}
	members, err = c2.Members(ctx)
	if err != nil || len(members) != 1 || members[0].Name != "n2" || members[0].PeerURLs[0] != peer2 {
		t.Fatalf("Members() after restore = %+v, %v, want n2 alone with peer URL %s", members, err, peer2)
	}
	if second.clientURL == first.clientURL {
		t.Fatal("both members on one client URL: the test would not prove anything")
	}
}
