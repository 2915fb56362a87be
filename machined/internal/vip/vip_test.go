package vip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/etcdops"
)

// fakeEtcd is one election key with leases that expire when not renewed within ttl of the fake clock
// (real time here: the test's TTLs are tens of milliseconds).
type fakeEtcd struct {
	mu      sync.Mutex
	next    int64
	expires map[int64]time.Time
	key     string
	owner   int64 // the lease the key is attached to
	down    bool  // every call fails, as when this node's member lost quorum
}

func newFakeEtcd() *fakeEtcd { return &fakeEtcd{expires: map[int64]time.Time{}} }

func (f *fakeEtcd) expire() {
	for id, t := range f.expires {
		if time.Now().After(t) {
			delete(f.expires, id)
			if f.owner == id {
				f.key, f.owner = "", 0
			}
		}
	}
}

// session is one node's view: the same etcd, with its own way to fail.
type session struct {
	f   *fakeEtcd
	ttl time.Duration
}

func (s *session) GrantLease(_ context.Context, ttl time.Duration) (int64, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.down {
		return 0, errors.New("etcd: no quorum")
	}
	s.f.next++
	s.ttl = ttl
	s.f.expires[s.f.next] = time.Now().Add(ttl)
	return s.f.next, nil
}

func (s *session) KeepAlive(_ context.Context, id int64) (time.Duration, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.down {
		return 0, errors.New("etcd: no quorum")
	}
	s.f.expire()
	if _, ok := s.f.expires[id]; !ok {
		return 0, etcdops.ErrLeaseGone
	}
	s.f.expires[id] = time.Now().Add(s.ttl)
	return s.ttl, nil
}

func (s *session) Claim(_ context.Context, _, value string, lease int64) (string, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.down {
		return "", errors.New("etcd: no quorum")
	}
	s.f.expire()
	if s.f.key == "" || s.f.key == value {
		s.f.key, s.f.owner = value, lease
	}
	return s.f.key, nil
}

func (s *session) Release(_ context.Context, _, value string, lease int64) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.key == value {
		s.f.key, s.f.owner = "", 0
	}
	delete(s.f.expires, lease)
	return nil
}

// fakeLink records which node has the address; two at once is the failure the election exists to
// prevent.
type fakeLink struct {
	node string
	c    *cluster
}

func (l fakeLink) Add(netip.Addr) (string, error) {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	if !slices.Contains(l.c.holders, l.node) {
		if len(l.c.holders) > 0 {
			l.c.overlaps = append(l.c.overlaps, fmt.Sprintf("%s took the address while %v had it", l.node, l.c.holders))
		}
		l.c.holders = append(l.c.holders, l.node)
	}
	return "eth1", nil
}

func (l fakeLink) Remove(netip.Addr) error {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	l.c.holders = slices.DeleteFunc(l.c.holders, func(n string) bool { return n == l.node })
	return nil
}

func (l fakeLink) Announce(netip.Addr, string) error { return nil }

// cluster is control planes sharing one etcd and one network.
type cluster struct {
	etcd     *fakeEtcd
	mu       sync.Mutex
	holders  []string // who has the address on its link now
	events   []string
	overlaps []string // each time a node took the address while another still had it
}

func (c *cluster) node(name string) *Holder {
	return &Holder{
		VIP: netip.MustParseAddr("10.5.0.100"), Node: name,
		Open: func() (Store, func(), error) { return &session{f: c.etcd}, func() {}, nil },
		Link: fakeLink{node: name, c: c},
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Event: func(outcome, _ string) {
			c.mu.Lock()
			c.events = append(c.events, name+" "+outcome)
			c.mu.Unlock()
		},
		TTL: 200 * time.Millisecond, Renew: 20 * time.Millisecond,
	}
}

func (c *cluster) setDown(down bool) {
	c.etcd.mu.Lock()
	c.etcd.down = down
	c.etcd.mu.Unlock()
}

// waitFor waits until the holders satisfy ok.
func (c *cluster) waitFor(t *testing.T, what string, ok func(holders []string) bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		h, ev := slices.Clone(c.holders), slices.Clone(c.events)
		c.mu.Unlock()
		if ok(h) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: holders = %v, events %v", what, h, ev)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestElection(t *testing.T) {
	c := &cluster{etcd: newFakeEtcd()}
	run := func(h *Holder) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); h.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	a, b := c.node("cp1"), c.node("cp2")

	stopA := run(a)
	c.waitFor(t, "cp1 alone takes the address", func(h []string) bool { return slices.Equal(h, []string{"cp1"}) })
	stopB := run(b)
	time.Sleep(100 * time.Millisecond)
	c.waitFor(t, "cp2 waits while cp1 renews", func(h []string) bool { return slices.Equal(h, []string{"cp1"}) })
	if got := b.HeldBy(); got != "cp1" {
		t.Errorf("cp2's HeldBy() = %q, want cp1", got)
	}

	// A graceful stop releases the key: cp2 takes over without waiting for the lease to expire.
	start := time.Now()
	stopA()
	c.waitFor(t, "cp2 takes over when cp1 stops", func(h []string) bool { return slices.Equal(h, []string{"cp2"}) })
	if took := time.Since(start); took >= a.TTL {
		t.Errorf("takeover after a release took %v, want less than the lease's %v", took, a.TTL)
	}

	// cp2 loses etcd (no quorum): it must drop the address before its lease can have expired, so that
	// when etcd comes back and cp1 claims, the two never hold it at once.
	c.setDown(true)
	c.waitFor(t, "cp2 drops the address when it cannot renew", func(h []string) bool { return len(h) == 0 })
	c.setDown(false)
	stopA = run(a)
	c.waitFor(t, "someone holds it again once etcd is back", func(h []string) bool { return len(h) == 1 })
	stopA()
	stopB()
	c.waitFor(t, "nobody holds it once both stopped", func(h []string) bool { return len(h) == 0 })

	c.mu.Lock()
	defer c.mu.Unlock()
	want := []string{"cp1 acquired", "cp1 released", "cp2 acquired", "cp2 lost"}
	if len(c.events) < len(want) || !slices.Equal(c.events[:len(want)], want) {
		t.Errorf("events = %v, want them to start with %v", c.events, want)
	}
}

func TestAddFailureReleasesTheKey(t *testing.T) {
	c := &cluster{etcd: newFakeEtcd()}
	h := c.node("cp1")
	h.Link = failingLink{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := h.round(ctx)
	if err == nil || err.Error() != "put 10.5.0.100 on this node: no link holds 10.5.0.0/24" {
		t.Fatalf("round() = %v, want the address named", err)
	}
	c.etcd.mu.Lock()
	defer c.etcd.mu.Unlock()
	if c.etcd.key != "" {
		t.Errorf("the key is held by %q after the address could not be added, want released", c.etcd.key)
	}
}

type failingLink struct{}

func (failingLink) Add(netip.Addr) (string, error) {
	return "", fmt.Errorf("no link holds 10.5.0.0/24")
}
func (failingLink) Remove(netip.Addr) error           { return nil }
func (failingLink) Announce(netip.Addr, string) error { return nil }

// lateSession is a node whose etcd member falls behind: its first renewal reaches the leader at once but
// is answered late, and the calls after it are not answered at all until the client's own timeout, which
// is longer than what is left of the lease.
type lateSession struct {
	session
	late, timeout time.Duration
	mu            sync.Mutex
	calls         int
}

func (s *lateSession) KeepAlive(ctx context.Context, id int64) (time.Duration, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	wait := s.timeout
	var ttl time.Duration
	var err error = errors.New("timeout awaiting response headers")
	if first {
		ttl, err = s.session.KeepAlive(ctx, id)
		wait = s.late
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(wait):
		return ttl, err
	}
}

// cutOff is a member that lost its quorum: no call succeeds.
type cutOff struct{ Store }

func (cutOff) GrantLease(context.Context, time.Duration) (int64, error) {
	return 0, errors.New("etcdserver: request timed out")
}

// TestLateRenewals: a holder counts its lease from when it sent the renewal, not from when the answer
// came, and gives up a renewal that can no longer answer in time, so it drops the address before another
// control plane can claim it. Counting from the answer, cp1 kept the address for most of a second after
// its lease had expired and cp2 had taken it.
func TestLateRenewals(t *testing.T) {
	c := &cluster{etcd: newFakeEtcd()}
	slow := true // cp1's first session; its later rounds find its member cut off
	a, b := c.node("cp1"), c.node("cp2")
	for _, h := range []*Holder{a, b} {
		h.TTL, h.Renew = time.Second, 250*time.Millisecond
	}
	a.Open = func() (Store, func(), error) {
		if slow {
			slow = false
			// Answered 400 ms late, then nothing for 600 ms at a time: counted from the late answer, the
			// lease would have 750 ms left when its first unanswered renewal gives up.
			return &lateSession{session: session{f: c.etcd}, late: 400 * time.Millisecond, timeout: 600 * time.Millisecond}, func() {}, nil
		}
		return cutOff{}, func() {}, nil
	}
	run := func(h *Holder) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); h.Run(ctx) }()
		return func() { cancel(); <-done }
	}
	stopA := run(a)
	defer stopA()
	c.waitFor(t, "cp1 takes the address", func(h []string) bool { return slices.Equal(h, []string{"cp1"}) })
	stopB := run(b)
	defer stopB()
	c.waitFor(t, "cp2 takes over once cp1's lease has expired", func(h []string) bool { return slices.Equal(h, []string{"cp2"}) })

	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.overlaps) > 0 {
		t.Errorf("two holders at once: %v (events %v)", c.overlaps, c.events)
	}
	if want := []string{"cp1 acquired", "cp1 lost", "cp2 acquired"}; len(c.events) < 3 || !slices.Equal(c.events[:3], want) {
		t.Errorf("events = %v, want them to start with %v", c.events, want)
	}
}

// slowSession answers every renewal late, though etcd renewed the lease when the call arrived: a member
// whose applies lag behind, answering within the lease but not within half of it.
type slowSession struct {
	session
	late time.Duration
}

func (s *slowSession) KeepAlive(ctx context.Context, id int64) (time.Duration, error) {
	ttl, err := s.session.KeepAlive(ctx, id)
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(s.late):
		return ttl, err
	}
}

// TestSlowAnswers: renewals answered a second late, with 1.75 s of a 2 s lease to drop the address by,
// keep it: the holder sends one every period without waiting for the answer to the last, so an answer
// for a renewal sent at most 1.25 s ago is always in. Waiting for each answer before sending the next,
// the second renewal went out a second after the first and its answer came too late.
func TestSlowAnswers(t *testing.T) {
	c := &cluster{etcd: newFakeEtcd()}
	h := c.node("cp1")
	h.TTL, h.Renew = 2*time.Second, 250*time.Millisecond
	h.Open = func() (Store, func(), error) {
		return &slowSession{session: session{f: c.etcd}, late: time.Second}, func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	c.waitFor(t, "cp1 takes the address", func(h []string) bool { return slices.Equal(h, []string{"cp1"}) })
	time.Sleep(2 * h.TTL)
	cancel()
	<-done

	c.mu.Lock()
	defer c.mu.Unlock()
	if want := []string{"cp1 acquired", "cp1 released"}; !slices.Equal(c.events, want) {
		t.Errorf("events = %v, want %v: the holder kept the address while every renewal was answered in time", c.events, want)
	}
}
