//go:build integration

package etcdops

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
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
	id, peers, err := c1.AddLearner(ctx, "n2", peer2)
	if err != nil {
		t.Fatalf("AddLearner = %v", err)
	}
	if len(peers) != 2 {
		t.Fatalf("AddLearner members = %+v, want n1 and the learner", peers)
	}
	again, peers2, err := c1.AddLearner(ctx, "n2", peer2)
	if err != nil || again != id || len(peers2) != 2 {
		t.Fatalf("AddLearner again = %x, %d members, %v; want the same learner %x and no third member", again, len(peers2), err, id)
	}
	// The join was interrupted and the node comes back at another address: its stale learner goes (etcd
	// admits one learner at a time, so it would refuse the new one), then back at the first address.
	elsewhere := "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	for _, url := range []string{elsewhere, peer2} {
		moved, peers3, err := c1.AddLearner(ctx, "n2", url)
		if err != nil || moved == id || len(peers3) != 2 {
			t.Fatalf("AddLearner(n2, %s) = %x, %+v, %v; want a new learner in place of %x, two members", url, moved, peers3, err, id)
		}
		id = moved
	}
	if err := c1.Promote(ctx, id); !errors.Is(err, ErrNotInSync) {
		t.Errorf("Promote of a learner that has not started = %v, want ErrNotInSync", err)
	}

	_, c2, _ := startMember(t, bin, p, filepath.Join(t.TempDir(), "etcd2"), "n2", peer2, "n1="+first.peerURL+",n2="+peer2)
	promoter := &Client{Endpoints: []string{first.clientURL}, CACert: p.CA, Cert: p.ClientCert, Key: p.ClientKey, Timeout: 2 * time.Second}
	promoteWhenInSync(ctx, t, promoter, id)
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

// promoteWhenInSync promotes learner id as soon as it has caught up.
func promoteWhenInSync(ctx context.Context, t *testing.T, c *Client, id uint64) {
	t.Helper()
	for {
		err := c.Promote(ctx, id)
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNotInSync) || ctx.Err() != nil {
			t.Fatalf("Promote = %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestRemoveMember is 'cairnctl etcd remove-member' against two real members: the leader is marked, an
// unknown name and the asking node's own member are refused with what to do, a member is removed by its
// hex ID, and the last voting member is refused.
func TestRemoveMember(t *testing.T) {
	bin := etcdBinary(t)
	p := newTestPKI(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, c1, _ := startEtcd(t, bin, p, filepath.Join(t.TempDir(), "etcd1"), "n1", "")
	peer2 := "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	id, _, err := c1.AddLearner(ctx, "n2", peer2)
	if err != nil {
		t.Fatalf("AddLearner = %v", err)
	}
	startMember(t, bin, p, filepath.Join(t.TempDir(), "etcd2"), "n2", peer2, "n1="+first.peerURL+",n2="+peer2)
	promoteWhenInSync(ctx, t, c1, id)

	members, err := c1.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leaders := 0
	for _, m := range members {
		if m.IsLeader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("members = %+v, want exactly one marked leader", members)
	}

	var unknown *UnknownMemberError
	if _, err := c1.RemoveMember(ctx, "n9", "n1"); !errors.As(err, &unknown) {
		t.Errorf("RemoveMember(n9) = %v, want UnknownMemberError", err)
	}
	var refused *RefusedError
	if _, err := c1.RemoveMember(ctx, "n1", "n1"); !errors.As(err, &refused) || !strings.Contains(err.Error(), "reset the node instead") {
		t.Errorf("RemoveMember of the asking node's own member = %v, want refused with what to do", err)
	}
	// etcd refuses a removal until every member has been connected for a few seconds: retry as an
	// operator would.
	for {
		removed, err := c1.RemoveMember(ctx, strconv.FormatUint(id, 16), "n1")
		if err == nil {
			if removed.Name != "n2" {
				t.Errorf("RemoveMember(%x) removed %+v, want n2", id, removed)
			}
			break
		}
		if !errors.As(err, &refused) || ctx.Err() != nil {
			t.Fatalf("RemoveMember(%x) = %v", id, err)
		}
		time.Sleep(time.Second)
	}
	if _, err := c1.RemoveMember(ctx, "n1", ""); !errors.As(err, &refused) || !strings.Contains(err.Error(), "only voting member") {
		t.Errorf("RemoveMember of the last voting member = %v, want refused", err)
	}
	if m, err := c1.Members(ctx); err != nil || len(m) != 1 || m[0].Name != "n1" || !m[0].IsLeader {
		t.Errorf("members after the removal = %+v, %v; want n1 alone, leading", m, err)
	}
}

// The members' recorded addresses: a started member's by its name, a learner that has not started by its
// peer URL's host, and none for a node that is no longer a member.
func TestNames(t *testing.T) {
	bin := etcdBinary(t)
	p := newTestPKI(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, c, _ := startEtcd(t, bin, p, filepath.Join(t.TempDir(), "etcd1"), "n1", "")
	for name, addr := range map[string]string{"n1": "10.0.0.1", "n3": "10.0.0.3", "gone": "10.0.0.9"} {
		if err := c.PutName(ctx, name, addr); err != nil {
			t.Fatalf("PutName(%s) = %v", name, err)
		}
	}
	if _, _, err := c.AddLearner(ctx, "n3", "https://n3:2380"); err != nil {
		t.Fatalf("AddLearner(n3) = %v", err)
	}
	if err := c.PutName(ctx, "n1", "10.0.0.2"); err != nil { // moved
		t.Fatalf("PutName(n1) again = %v", err)
	}
	got, err := c.Names(ctx)
	if err != nil {
		t.Fatalf("Names = %v", err)
	}
	if want := map[string]string{"n1": "10.0.0.2", "n3": "10.0.0.3"}; !maps.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if err := c.PutName(ctx, "a/b", "10.0.0.4"); err == nil {
		t.Errorf("PutName(a/b) = nil, want an error: not a node name")
	}
}
