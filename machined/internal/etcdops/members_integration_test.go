//go:build integration

package etcdops

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestLearnerJoinPromoteLeave is a control-plane join's etcd half against the bundle's etcd: the first
// member adds the second as a learner (twice, as a retried join would), the second starts into the
// existing cluster, is promoted once in sync and votes; then it leaves, and the last member refuses to.
func TestLearnerJoinPromoteLeave(t *testing.T) {
	bin := etcdBinary(t)
	p := newTestPKI(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, c1, _ := startEtcd(t, bin, p, filepath.Join(t.TempDir(), "etcd1"), "n1", "")

	peer2 := "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	id, peers, err := c1.AddLearner(ctx, peer2)
	if err != nil {
		t.Fatalf("AddLearner = %v", err)
	}
	if len(peers) != 2 {
		t.Fatalf("AddLearner members = %+v, want n1 and the learner", peers)
	}
	again, peers2, err := c1.AddLearner(ctx, peer2)
	if err != nil || again != id || len(peers2) != 2 {
		t.Fatalf("AddLearner again = %x, %d members, %v; want the same learner %x and no third member", again, len(peers2), err, id)
	}
	if err := c1.Promote(ctx, id); !errors.Is(err, ErrNotInSync) {
		t.Errorf("Promote of a learner that has not started = %v, want ErrNotInSync", err)
	}

	_, c2, _ := startMember(t, bin, p, filepath.Join(t.TempDir(), "etcd2"), "n2", peer2, "n1="+first.peerURL+",n2="+peer2)
	promoter := &Client{Endpoints: []string{first.clientURL}, CACert: p.CA, Cert: p.ClientCert, Key: p.ClientKey, Timeout: 2 * time.Second}
	for {
		err := promoter.Promote(ctx, id)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotInSync) || ctx.Err() != nil {
			t.Fatalf("Promote = %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := promoter.Promote(ctx, id); err != nil {
		t.Errorf("Promote of a voting member = %v, want nil", err)
	}
	members, err := c2.Members(ctx)
	if err != nil {
		t.Fatalf("Members from the promoted member = %v", err)
	}
	if len(members) != 2 || members[0].IsLearner || members[1].IsLearner || members[1].Name != "n2" {
		t.Fatalf("members = %+v, want n1 and n2, both voting", members)
	}

	// etcd refuses to remove a member until every member has been connected for a few seconds
	// ("unhealthy cluster"): a leave retries, as the reset task does.
	for {
		removed, err := c1.Leave(ctx, peer2)
		if err == nil && removed {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Leave(n2) = %v, %v; want removed", removed, err)
		}
		time.Sleep(time.Second)
	}
	if removed, err := c1.Leave(ctx, first.peerURL); err != nil || removed {
		t.Errorf("Leave of the last member = %v, %v; want it kept and no error", removed, err)
	}
	if m, err := c1.Members(ctx); err != nil || len(m) != 1 || m[0].Name != "n1" {
		t.Errorf("members after the leave = %+v, %v; want n1 alone", m, err)
	}
}
