package workload

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/cairn-os/cairn/machined/internal/vip"
)

// vipStopWait bounds how long a stop waits for the holder to release the address: the release is one
// etcd call, and a node that cannot make it lets the lease expire instead.
const vipStopWait = vip.DefaultTTL + 5*time.Second

// startVIP starts this control plane's part in the election of cluster.vip once its API server answers
// (the election runs on etcd, healthy by then), and before the add-ons, so the first control plane holds
// the endpoint's address by the time its add-ons and the workers use it. A control plane that restarts
// or joins must not stand before that: the address would go to a node that does not serve the API yet,
// from one that does, whenever the holder's renewal ran late (make e2e-ha saw it, with the restarting
// node too busy starting to keep the address anyway). It runs until the node stops, reboots or leaves
// (stopVIP); a second call does nothing.
func (w *Workload) startVIP(context.Context) error {
	c := w.config()
	if c == nil || c.Cluster.VIP == "" {
		return nil
	}
	addr, err := netip.ParseAddr(c.Cluster.VIP)
	if err != nil {
		return fmt.Errorf("cluster.vip %q: %w", c.Cluster.VIP, err)
	}
	if w.VIPLink == nil {
		w.Log.Info("vip: sandbox mode takes no part in the election of cluster.vip", "vip", addr)
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.vipStop != nil {
		return nil
	}
	name, _ := w.Identity()
	h := &vip.Holder{VIP: addr, Node: name, Link: w.VIPLink, Log: w.Log, Event: w.VIPEvent,
		Open: func() (vip.Store, func(), error) {
			s, err := w.etcdOps().Session()
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	w.vipStop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(vipStopWait):
			w.Log.Warn("vip: the election did not stop in time", "waited", vipStopWait)
		}
	}
	return nil
}

// stopVIP ends this node's part in the election; a holder releases the address first.
func (w *Workload) stopVIP() {
	w.mu.Lock()
	stop := w.vipStop
	w.vipStop = nil
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
}
