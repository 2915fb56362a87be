package etcdops

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNoCertificateMeansEtcdIsNotHere(t *testing.T) {
	dir := t.TempDir()
	c := &Client{CACert: filepath.Join(dir, "etcd", "ca.crt"), Cert: filepath.Join(dir, "etcd", "healthcheck-client.crt"),
		Key: filepath.Join(dir, "etcd", "healthcheck-client.key")}
	_, err := c.Members(context.Background())
	var nh *NotHereError
	if !errors.As(err, &nh) || !strings.Contains(err.Error(), "ca.crt") {
		t.Fatalf("Members() without a PKI = %v, want a NotHereError naming the CA file", err)
	}
	var marker interface{ Precondition() }
	if !errors.As(err, &marker) {
		t.Errorf("%T has no Precondition() marker for the API", err)
	}
	var buf bytes.Buffer
	if _, err := c.Snapshot(context.Background(), &buf); !errors.As(err, &nh) || buf.Len() != 0 {
		t.Errorf("Snapshot() without a PKI = %v after %d bytes, want a NotHereError and nothing written", err, buf.Len())
	}
}

func TestBadCertificatesAreNamed(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Client)
		want   string
	}{
		{"CA is not PEM", func(c *Client) { c.CACert = c.Key; writeFile(t, c.Key, "not pem") }, "no PEM certificate"},
		{"key of another certificate", func(c *Client) { c.Key = filepath.Join(filepath.Dir(c.Cert), "server.key") }, "healthcheck-client.crt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPKI(t, t.TempDir())
			c := &Client{CACert: p.CA, Cert: p.ClientCert, Key: p.ClientKey}
			tc.mutate(c)
			_, err := c.Members(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Members() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestUnansweringEtcdIsUnavailable(t *testing.T) {
	p := newTestPKI(t, t.TempDir())
	// A port nothing listens on.
	c := &Client{Endpoints: []string{"https://127.0.0.1:1"}, CACert: p.CA, Cert: p.ClientCert, Key: p.ClientKey, Timeout: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Members(ctx)
	var ue interface{ Unavailable() }
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Members() of no etcd = %v, want an UnavailableError naming the endpoint", err)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeEtcdutl stands in for `etcdutl snapshot restore`: it records its arguments and, like the real
// one, writes a member directory under --data-dir, then fails with fail if that is set.
type fakeEtcdutl struct {
	args []string
	fail error
}

func (f *fakeEtcdutl) run(_ context.Context, args ...string) error {
	f.args = args
	for i, a := range args {
		if a == "--data-dir" && i+1 < len(args) {
			if err := os.MkdirAll(filepath.Join(args[i+1], "member", "snap"), 0o700); err != nil {
				return err
			}
		}
	}
	return f.fail
}

func TestRestore(t *testing.T) {
	m := Member{Name: "n2", PeerURL: "https://10.0.0.2:2380"}
	ctx := context.Background()
	t.Run("restores through etcdutl", func(t *testing.T) {
		data := t.TempDir()
		os.Mkdir(filepath.Join(data, "lost+found"), 0o700) // a fresh ext4 volume is not empty
		snap := filepath.Join(t.TempDir(), "snap.db")
		writeFile(t, snap, "a snapshot")
		var f fakeEtcdutl
		if err := Restore(ctx, f.run, snap, data, m); err != nil {
			t.Fatalf("Restore() = %v", err)
		}
		want := []string{"snapshot", "restore", snap, "--data-dir", filepath.Join(data, ".restore"), "--name", "n2",
			"--initial-cluster", "n2=https://10.0.0.2:2380", "--initial-cluster-token", "etcd-cluster",
			"--initial-advertise-peer-urls", "https://10.0.0.2:2380"}
		if diff := cmp.Diff(want, f.args); diff != "" {
			t.Errorf("etcdutl arguments (-want +got):\n%s", diff)
		}
		if got := dirNames(t, data); !cmp.Equal(got, []string{"lost+found", "member"}) {
			t.Errorf("data directory after a restore holds %v, want lost+found and member", got)
		}
	})
	t.Run("existing member", func(t *testing.T) {
		data := t.TempDir()
		os.Mkdir(filepath.Join(data, "member"), 0o700)
		snap := filepath.Join(t.TempDir(), "snap.db")
		writeFile(t, snap, "whatever")
		var f fakeEtcdutl
		if err := Restore(ctx, f.run, snap, data, m); !errors.Is(err, ErrDataExists) || f.args != nil {
			t.Fatalf("Restore() onto a member = %v (etcdutl ran: %v), want ErrDataExists and no etcdutl", err, f.args != nil)
		}
	})
	t.Run("missing snapshot", func(t *testing.T) {
		snap := filepath.Join(t.TempDir(), "nope.db")
		var f fakeEtcdutl
		if err := Restore(ctx, f.run, snap, t.TempDir(), m); err == nil || !strings.Contains(err.Error(), snap) {
			t.Fatalf("Restore(missing) = %v, want an error naming %s", err, snap)
		}
	})
	t.Run("etcdutl fails", func(t *testing.T) {
		data := t.TempDir()
		os.Mkdir(filepath.Join(data, "lost+found"), 0o700)
		os.MkdirAll(filepath.Join(data, ".restore", "member"), 0o700) // an interrupted earlier attempt
		snap := filepath.Join(t.TempDir(), "garbage.db")
		writeFile(t, snap, "not a bbolt database")
		f := fakeEtcdutl{fail: errors.New("etcdutl exited with status 1: snapshot file integrity check failed")}
		err := Restore(ctx, f.run, snap, data, m)
		if err == nil || !strings.Contains(err.Error(), snap) || !strings.Contains(err.Error(), "integrity check failed") {
			t.Fatalf("Restore(garbage) = %v, want an error naming %s and etcdutl's reason", err, snap)
		}
		if got := dirNames(t, data); !cmp.Equal(got, []string{"lost+found"}) {
			t.Errorf("data directory after a failed restore holds %v, want only lost+found", got)
		}
	})
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestStaleLearners(t *testing.T) {
	ms := []member{
		{ID: 1, Name: "cp1"},
		{ID: 2, Name: "cp2", IsLearner: true},  // cp2's earlier join, started
		{ID: 3, IsLearner: true},               // a learner that never started
		{ID: 4, Name: "cp3", IsLearner: true},  // another node's learner, running
		{ID: 5, Name: "cp2", IsLearner: false}, // not a learner: never touched here
	}
	var got []uint64
	for _, m := range staleLearners(ms, "cp2") {
		got = append(got, m.ID)
	}
	if want := []uint64{2, 3}; !slices.Equal(got, want) {
		t.Errorf("staleLearners(cp2) = %v, want %v", got, want)
	}
}
