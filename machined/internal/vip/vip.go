// Package vip keeps the cluster's API endpoint on a shared virtual IP that one control plane holds at a
// time (cluster.vip). The control planes elect the holder through etcd: the holder writes a key under a
// lease and keeps the lease alive; it puts the address on the link whose subnet holds it and announces it
// with gratuitous ARP, so the network sends the address's traffic to it. When the holder stops renewing
// (it died, or lost its etcd quorum), etcd deletes the key with the lease and another control plane's
// claim succeeds within the lease's time-to-live; a holder that shuts down releases the key at once.
//
// A holder that cannot renew drops the address before its lease can have expired in etcd, so two nodes
// never answer for the address at once. It counts the lease's life from when it sent the call that
// renewed it, not from when the answer came: an etcd that answers late (a member whose applies lag, a
// vCPU shared with the API server) renewed the lease somewhere in between, and a holder counting from
// the answer kept the address while another control plane had already claimed it. So that late answers
// alone do not cost the address, it sends a renewal every period without waiting for the last answer.
package vip

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/cairn-os/cairn/machined/internal/etcdops"
)

// Store is etcd, through one session (etcdops.Session). KeepAlive returns etcdops.ErrLeaseGone when
// etcd no longer has the lease. Claim moves a key that already holds value under another lease (this
// node's claim of a round that ended without a release) to the given one, so that the key lives as long
// as the lease the holder renews.
type Store interface {
	GrantLease(ctx context.Context, ttl time.Duration) (int64, error)
	KeepAlive(ctx context.Context, id int64) (time.Duration, error)
	Claim(ctx context.Context, key, value string, lease int64) (holder string, err error)
	Release(ctx context.Context, key, value string, lease int64) error
}

// Link puts the address on this node and tells the network (netcfg.VIPLink).
type Link interface {
	// Add puts vip on the link whose subnet holds it and returns the link's name.
	Add(vip netip.Addr) (link string, err error)
	// Remove takes vip off this node; an address that is not there is no error.
	Remove(vip netip.Addr) error
	// Announce sends gratuitous ARP for vip on link.
	Announce(vip netip.Addr, link string) error
}

// Defaults: a holder that dies is replaced within about TTL; it renews every Renew.
const (
	DefaultTTL   = 10 * time.Second
	DefaultRenew = 2 * time.Second
	// announcements are sent on taking the address, one per renewal: a switch or a neighbour that
	// missed the first learns the new holder from the next.
	announcements = 3
)

// Key is the election's key for vip.
func Key(vip netip.Addr) string { return "/cairn/vip/" + vip.String() }

// Holder runs this node's part in the election.
type Holder struct {
	VIP  netip.Addr
	Node string // this node's name: the key's value while it holds the address
	// Open opens a session with this node's etcd member; close ends it.
	Open func() (s Store, close func(), err error)
	Link Link
	Log  *slog.Logger
	// Event reports a change of holder on this node: outcome is acquired, released or lost.
	Event      func(outcome, message string)
	TTL, Renew time.Duration // zero: DefaultTTL, DefaultRenew

	mu     sync.Mutex
	holder string // who holds the address, as last seen ("" unknown)
}

// Holder outcomes, for Event.
const (
	Acquired = "acquired"
	Released = "released"
	Lost     = "lost"
)

// HeldBy is the node that holds the address, as this node last saw it ("" if unknown).
func (h *Holder) HeldBy() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holder
}

func (h *Holder) setHolder(n string) {
	h.mu.Lock()
	changed := h.holder != n
	h.holder = n
	h.mu.Unlock()
	if changed && n != "" && n != h.Node {
		h.Log.Info("vip: held by another control plane", "vip", h.VIP, "holder", n)
	}
}

func (h *Holder) ttl() time.Duration   { return cmp.Or(h.TTL, DefaultTTL) }
func (h *Holder) renew() time.Duration { return cmp.Or(h.Renew, DefaultRenew) }

// Run takes part in the election until ctx ends; a holder then releases the address. Errors (etcd not
// answering) are logged when they change and retried every renewal period.
func (h *Holder) Run(ctx context.Context) {
	last := ""
	for {
		err := h.round(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil && err.Error() != last {
			h.Log.Warn("vip: election", "vip", h.VIP, "error", err)
		}
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.renew()):
		}
	}
}

// round takes one lease, claims the key until the claim wins, then holds the address until the lease is
// lost or ctx ends.
func (h *Holder) round(ctx context.Context) error {
	s, closeStore, err := h.Open()
	if err != nil {
		return err
	}
	defer closeStore()
	// renewed is when the lease was last renewed, at the latest: the time the call that renewed it was
	// sent. etcd renewed it later than that, so it cannot expire before renewed + TTL.
	renewed := time.Now()
	lease, err := s.GrantLease(ctx, h.ttl())
	if err != nil {
		return err
	}
	tick := time.NewTicker(h.renew())
	defer tick.Stop()
	for {
		holder, err := s.Claim(ctx, Key(h.VIP), h.Node, lease)
		if err != nil {
			return err
		}
		h.setHolder(holder)
		if holder == h.Node {
			return h.hold(ctx, s, lease, renewed, tick.C)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		sent := time.Now()
		if _, err := s.KeepAlive(ctx, lease); err != nil {
			return err
		}
		renewed = sent
	}
}

// dropBy is when a holder whose lease was last renewed at renewed must have dropped the address: one
// renewal period before the lease can expire in etcd, the time the address takes to come off.
func (h *Holder) dropBy(renewed time.Time) time.Time { return renewed.Add(h.ttl() - h.renew()) }

// keepAlive renews the lease, giving up at by (a dropBy): an answer after that would come too late to
// keep the address (the etcd client's own timeout is longer than the lease).
func (h *Holder) keepAlive(ctx context.Context, s Store, lease int64, by time.Time) error {
	kctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	_, err := s.KeepAlive(kctx, lease)
	if err != nil && ctx.Err() == nil && kctx.Err() != nil {
		return fmt.Errorf("etcd did not answer a renewal of lease %x before the address had to come off: %w", lease, err)
	}
	return err
}

// hold keeps the address while the lease lives; renewed is as in round.
func (h *Holder) hold(ctx context.Context, s Store, lease int64, renewed time.Time, tick <-chan time.Time) error {
	key := Key(h.VIP)
	// A claim that came back late leaves less than a renewal period of the lease: renew it before the
	// address goes up rather than put up an address that may have to come down at once.
	if time.Until(h.dropBy(renewed)) < h.renew() {
		at := time.Now()
		if err := h.keepAlive(ctx, s, lease, h.dropBy(renewed)); err != nil {
			return err
		}
		renewed = at
	}
	link, err := h.Link.Add(h.VIP)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), h.ttl())
		defer cancel()
		_ = s.Release(rctx, key, h.Node, lease)
		return fmt.Errorf("put %s on this node: %w", h.VIP, err)
	}
	h.event(Acquired, fmt.Sprintf("this node holds the API's virtual IP %s on %s", h.VIP, link))
	sent := 0
	announce := func() {
		if sent >= announcements {
			return
		}
		sent++
		if err := h.Link.Announce(h.VIP, link); err != nil {
			h.Log.Warn("vip: gratuitous ARP", "vip", h.VIP, "link", link, "error", err)
		}
	}
	announce()
	// A renewal goes out every period without waiting for the one before it to answer, as etcd's own
	// client streams them: when answers take seconds, the renewals still out are what keep the lease's
	// known life ahead of the clock. Each is given up once its answer could no longer keep the address.
	type answer struct {
		sent time.Time
		err  error
	}
	maxOut := int((h.ttl()-h.renew())/h.renew()) + 1
	answers := make(chan answer, maxOut) // room for every call out, so none blocks after hold returns
	calls, stopCalls := context.WithCancel(ctx)
	var out sync.WaitGroup
	defer func() { stopCalls(); out.Wait() }()
	pending := 0
	var lastErr error
	// The deadline is the last renewal's dropBy: the address comes off then unless an answer moved it.
	deadline := time.NewTimer(time.Until(h.dropBy(renewed)))
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			// The address comes off before the key goes: a claim that wins at once must find it gone.
			h.drop()
			rctx, cancel := context.WithTimeout(context.Background(), h.ttl())
			err := s.Release(rctx, key, h.Node, lease)
			cancel()
			h.setHolder("")
			h.event(Released, fmt.Sprintf("this node released the API's virtual IP %s", h.VIP))
			if err != nil {
				h.Log.Warn("vip: release the election key (the next holder waits for the lease to expire)", "error", err)
			}
			return nil
		case <-deadline.C:
			err := fmt.Errorf("etcd renewed lease %x in none of the calls sent in the last %v", lease, h.ttl()-h.renew())
			if lastErr != nil {
				err = fmt.Errorf("%w (last: %w)", err, lastErr)
			}
			return h.lose(err)
		case a := <-answers:
			pending--
			switch {
			case a.err == nil:
				if a.sent.After(renewed) {
					renewed = a.sent
					deadline.Reset(time.Until(h.dropBy(renewed)))
				}
			case errors.Is(a.err, etcdops.ErrLeaseGone):
				return h.lose(a.err)
			default:
				lastErr = a.err
			}
		case <-tick:
			announce()
			if pending == maxOut {
				continue
			}
			pending++
			sent := time.Now()
			out.Go(func() { answers <- answer{sent, h.keepAlive(calls, s, lease, h.dropBy(sent))} })
		}
	}
}

// lose drops the address because the lease is gone or may be about to be.
func (h *Holder) lose(err error) error {
	h.drop()
	h.setHolder("")
	h.event(Lost, fmt.Sprintf("this node gave up the API's virtual IP %s: %v", h.VIP, err))
	return err
}

func (h *Holder) drop() {
	if err := h.Link.Remove(h.VIP); err != nil {
		h.Log.Error("vip: take the address off this node", "vip", h.VIP, "error", err)
	}
}

func (h *Holder) event(outcome, msg string) {
	h.Log.Info("vip: "+msg, "outcome", outcome)
	if h.Event != nil {
		h.Event(outcome, msg)
	}
}
