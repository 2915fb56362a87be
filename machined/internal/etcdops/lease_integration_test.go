//go:build integration

package etcdops

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// leaseEtcd starts a one-member etcd for the test and returns a context that bounds the test and a way to
// open sessions with it, closed when the test ends.
func leaseEtcd(t *testing.T) (context.Context, func() *Session) {
	t.Helper()
	p := newTestPKI(t, t.TempDir())
	_, c, _ := startEtcd(t, etcdBinary(t), p, filepath.Join(t.TempDir(), "etcd"), "n1", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, func() *Session {
		s, err := c.Session()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
}

// The VIP's election against a real etcd: two sessions claim one key; the second sees the first hold
// it, takes it after a release, and after the holder's lease expires by itself.
func TestLeaseClaimRelease(t *testing.T) {
	ctx, open := leaseEtcd(t)
	a, b := open(), open()
	const key = "/cairn/vip/10.5.0.100"
	la, err := a.GrantLease(ctx, 2*time.Second)
	if err != nil {
		t.Fatalf("GrantLease() = %v", err)
	}
	lb, err := b.GrantLease(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	claim := func(s *Session, node string, lease int64, want string) {
		t.Helper()
		got, err := s.Claim(ctx, key, node, lease)
		if err != nil || got != want {
			t.Fatalf("Claim(%s) = %q, %v, want %q", node, got, err, want)
		}
	}
	claim(a, "cp1", la, "cp1")
	claim(b, "cp2", lb, "cp1")
	claim(a, "cp1", la, "cp1") // a holder claiming again still holds it
	if ttl, err := a.KeepAlive(ctx, la); err != nil || ttl <= 0 {
		t.Fatalf("KeepAlive() = %v, %v, want the lease's time left", ttl, err)
	}

	if err := b.Release(ctx, key, "cp2", lb); err != nil {
		t.Fatalf("Release() by a non-holder = %v", err)
	}
	claim(a, "cp1", la, "cp1") // a non-holder's release leaves the key alone
	lb, err = b.GrantLease(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, key, "cp1", la); err != nil {
		t.Fatalf("Release() = %v", err)
	}
	if _, err := a.KeepAlive(ctx, la); !errors.Is(err, ErrLeaseGone) {
		t.Errorf("KeepAlive() of a revoked lease = %v, want ErrLeaseGone", err)
	}
	claim(b, "cp2", lb, "cp2")

	// cp2 stops renewing: its lease expires, the key goes with it, and cp1's claim wins.
	lb2, err := b.GrantLease(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, key, "cp2", lb); err != nil {
		t.Fatal(err)
	}
	claim(b, "cp2", lb2, "cp2")
	la, err = a.GrantLease(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := a.Claim(ctx, key, "cp1", la)
		if err != nil {
			t.Fatal(err)
		}
		if got == "cp1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key is still held by %q 30 s after its lease's 2 s TTL", got)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// A node that claims again under a new lease while its key of an earlier round is still there (that round
// ended without releasing it) moves the key to the new lease: the key outlives the old lease, and another
// node's claim still loses.
func TestClaimMovesOwnKey(t *testing.T) {
	ctx, open := leaseEtcd(t)
	a := open()
	const key = "/cairn/vip/10.5.0.100"
	grant := func(ttl time.Duration) int64 {
		t.Helper()
		id, err := a.GrantLease(ctx, ttl)
		if err != nil {
			t.Fatalf("GrantLease() = %v", err)
		}
		return id
	}
	claim := func(node string, lease int64) string {
		t.Helper()
		got, err := a.Claim(ctx, key, node, lease)
		if err != nil {
			t.Fatalf("Claim(%s) = %v", node, err)
		}
		return got
	}
	old := grant(2 * time.Second)
	if got := claim("cp1", old); got != "cp1" {
		t.Fatalf("first claim = %q, want cp1", got)
	}
	if got := claim("cp1", grant(30*time.Second)); got != "cp1" {
		t.Fatalf("claim under a new lease = %q, want cp1", got)
	}
	time.Sleep(4 * time.Second) // the old lease expires
	if got := claim("cp2", grant(30*time.Second)); got != "cp1" {
		t.Errorf("after cp1's old lease expired, cp2's claim = %q, want the key still cp1's", got)
	}
}
