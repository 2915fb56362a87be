package etcdops

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-os/cairn/machined/internal/etcdmember"
)

// Membership changes for control-plane joins and leaves. A new member always comes in as a learner: it
// gets the log without a vote, so a joining node that never starts, or starts slowly, cannot cost the
// cluster its quorum (adding a voter to a one-member cluster would need both to answer). It is promoted
// once it has caught up.

// Peer is one member as a joining node needs it for etcd's --initial-cluster.
type Peer struct {
	ID        uint64
	Name      string // empty while the member has not started
	PeerURL   string
	ClientURL string // empty while the member has not started
}

// ErrNotInSync is returned by Promote while the learner has not caught up with the leader; try again.
var ErrNotInSync = errors.New("the learner is not in sync with the leader yet")

// etcd's answers to a promotion it refuses (the messages of its API's errors), which mean "done
// already" and "not yet".
const (
	msgNotLearner      = "etcdserver: can only promote a learner member"
	msgLearnerNotReady = "etcdserver: can only promote a learner member which is in sync with leader"
	msgMemberNotFound  = "etcdserver: member not found"
)

// AddLearner adds a learner member for node name that will listen on peerURL and returns its ID and
// every member afterwards. A member that already has peerURL (a join retried after the ticket was lost) is
// returned instead of adding a second one. A learner left by a join that never finished is removed first:
// one of the same node at another address, or one that never started (etcd admits one learner at a
// time, so a stale one would refuse every later join).
func (c *Client) AddLearner(ctx context.Context, name, peerURL string) (uint64, []Peer, error) {
	var id uint64
	var peers []Peer
	err := c.with(ctx, func(ctx context.Context, hc *http.Client) error {
		var list memberListResponse
		if err := c.call(ctx, hc, "/v3/cluster/member/list", struct{}{}, &list); err != nil {
			return fmt.Errorf("member list: %w", err)
		}
		peers = toPeers(list.Members)
		for _, m := range list.Members {
			if slices.Contains(m.PeerURLs, peerURL) {
				id = m.ID
				return nil
			}
		}
		for _, m := range staleLearners(list.Members, name) {
			if err := c.call(ctx, hc, "/v3/cluster/member/remove", memberIDRequest{ID: m.ID}, nil); err != nil {
				return fmt.Errorf("remove the stale learner %x (%s) of an unfinished join: %w", m.ID, strings.Join(m.PeerURLs, ","), err)
			}
		}
		var add memberAddResponse
		// Right after a removal etcd answers an add with "member not found" for about a second (measured
		// against etcd v3.6: three tries 300 ms apart) while the removal settles; only then is it retried.
		removed := len(staleLearners(list.Members, name)) > 0
		for attempt := 1; ; attempt++ {
			err := c.call(ctx, hc, "/v3/cluster/member/add", memberAddRequest{PeerURLs: []string{peerURL}, IsLearner: true}, &add)
			var se *StatusError
			if err == nil || !removed || attempt == 20 || !errors.As(err, &se) || se.Message != msgMemberNotFound {
				if err != nil {
					return fmt.Errorf("add a learner at %s: %w", peerURL, err)
				}
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(300 * time.Millisecond):
			}
		}
		id, peers = add.Member.ID, toPeers(add.Members)
		return nil
	})
	return id, peers, err
}

// staleLearners are the learners a new join of node name replaces: its own from an earlier attempt (at
// another address), and any that never started.
func staleLearners(ms []member, name string) []member {
	var out []member
	for _, m := range ms {
		if m.IsLearner && (m.Name == "" || m.Name == name) {
			out = append(out, m)
		}
	}
	return out
}

// Promote makes learner id a voting member. It returns nil when id votes already, and ErrNotInSync while
// the learner is catching up.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	return c.with(ctx, func(ctx context.Context, hc *http.Client) error {
		err := c.call(ctx, hc, "/v3/cluster/member/promote", memberIDRequest{ID: id}, nil)
		var se *StatusError
		if errors.As(err, &se) {
			switch se.Message {
			case msgNotLearner:
				return nil
			case msgLearnerNotReady:
				return ErrNotInSync
			}
		}
		if err != nil {
			return fmt.Errorf("promote member %x: %w", id, err)
		}
		return nil
	})
}

// Leave removes the member listening on one of peerURLs, unless it is the only one: a cluster cannot
// remove its last member, and a single control plane that resets takes its etcd with it anyway. It
// returns whether a member was removed.
func (c *Client) Leave(ctx context.Context, peerURLs ...string) (bool, error) {
	removed := false
	err := c.with(ctx, func(ctx context.Context, hc *http.Client) error {
		var list memberListResponse
		if err := c.call(ctx, hc, "/v3/cluster/member/list", struct{}{}, &list); err != nil {
			return fmt.Errorf("member list: %w", err)
		}
		if len(list.Members) < 2 {
			return nil
		}
		for _, m := range list.Members {
			if slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(peerURLs, u) }) {
				if err := c.call(ctx, hc, "/v3/cluster/member/remove", memberIDRequest{ID: m.ID}, nil); err != nil {
					return fmt.Errorf("remove member %s (%x): %w", m.Name, m.ID, err)
				}
				removed = true
			}
		}
		return nil
	})
	return removed, err
}

// with runs f with a client for the operation, wrapping a failure as Unavailable.
func (c *Client) with(ctx context.Context, f func(context.Context, *http.Client) error) error {
	hc, err := c.httpClient(0)
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	err = f(ctx, hc)
	if err == nil || errors.Is(err, ErrNotInSync) {
		return err
	}
	return c.unavailable(ctx, err)
}

func toPeers(ms []member) []Peer {
	out := make([]Peer, 0, len(ms))
	for _, m := range ms {
		p := Peer{ID: m.ID, Name: m.Name}
		if len(m.PeerURLs) > 0 {
			p.PeerURL = m.PeerURLs[0]
		}
		if len(m.ClientURLs) > 0 {
			p.ClientURL = m.ClientURLs[0]
		}
		out = append(out, p)
	}
	return out
}

// RefusedError says why a member is not removed; the API answers FailedPrecondition.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Precondition marks the error for the API's code mapping.
func (e *RefusedError) Precondition() {}

// UnknownMemberError says no member has that name or ID; the API answers NotFound.
type UnknownMemberError struct {
	Member string
	Have   []string
}

func (e *UnknownMemberError) Error() string {
	return fmt.Sprintf("etcd has no member %q (members: %s)", e.Member, strings.Join(e.Have, ", "))
}

// NotFound marks the error for the API's code mapping.
func (e *UnknownMemberError) NotFound() {}

// RemoveMember removes a member for an operator whose node is gone for good: who is its name or its ID in
// hex, as 'cairnctl etcd members' shows them. It refuses the member named self (the node asked: reset it
// instead, which leaves etcd before it wipes) and the cluster's last voting member. etcd itself refuses a
// removal that would leave the members still up without a quorum.
func (c *Client) RemoveMember(ctx context.Context, who, self string) (etcdmember.Member, error) {
	hc, err := c.httpClient(0)
	if err != nil {
		return etcdmember.Member{}, err
	}
	defer hc.CloseIdleConnections()
	var list memberListResponse
	if err := c.call(ctx, hc, "/v3/cluster/member/list", struct{}{}, &list); err != nil {
		return etcdmember.Member{}, c.unavailable(ctx, fmt.Errorf("member list: %w", err))
	}
	var target *member
	voters := 0
	var have []string
	for i, m := range list.Members {
		id := strconv.FormatUint(m.ID, 16)
		have = append(have, cmp.Or(m.Name, "(not started)")+" "+id)
		if !m.IsLearner {
			voters++
		}
		if (m.Name != "" && m.Name == who) || strings.EqualFold(id, who) {
			target = &list.Members[i]
		}
	}
	if target == nil {
		return etcdmember.Member{}, &UnknownMemberError{Member: who, Have: have}
	}
	removed := etcdmember.Member{ID: target.ID, Name: target.Name, PeerURLs: target.PeerURLs, ClientURLs: target.ClientURLs,
		IsLearner: target.IsLearner}
	switch {
	case self != "" && target.Name == self:
		return removed, &RefusedError{Reason: fmt.Sprintf("member %s is this node's own: reset the node instead (cairnctl reset leaves etcd before it wipes), or ask another control plane", self)}
	case !target.IsLearner && voters == 1:
		return removed, &RefusedError{Reason: fmt.Sprintf("member %s is the cluster's only voting member: removing it would end the cluster", cmp.Or(target.Name, who))}
	}
	if err := c.call(ctx, hc, "/v3/cluster/member/remove", memberIDRequest{ID: target.ID}, nil); err != nil {
		var se *StatusError
		if errors.As(err, &se) {
			return removed, &RefusedError{Reason: fmt.Sprintf("etcd refuses to remove member %s (%x): %s", cmp.Or(target.Name, who), target.ID, se.Message)}
		}
		return removed, c.unavailable(ctx, fmt.Errorf("remove member %x: %w", target.ID, err))
	}
	return removed, nil
}
