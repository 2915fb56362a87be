package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
)

// PlatformAnswer is what the platform search found (Options.Platform).
type PlatformAnswer struct {
	// Source is the source that answered (nocloud, ec2, gce, openstack); "" when none did.
	Source string
	// Tried lists every source tried, in order, as "name: outcome".
	Tried []string
	// UserData is the user data (nil: the platform gives none).
	UserData []byte
	// Hostname is the platform's name for the node ("" when it gives none); a config's
	// machine.hostname still wins.
	Hostname string
	// Network is the platform's network configuration (nil: none); a config's machine.network still
	// wins.
	Network *config.Network
}

// startPlatform looks for user data in the background when the node has no lock and its kernel command
// line does not name a cluster to join: a cloud image's first boot takes its config from the platform
// (kops' model: every node from one image, configured by the group it is in). The API serves
// maintenance mode meanwhile, and an operator's Init or Join still wins if it comes first.
func (n *Node) startPlatform() {
	if n.o.Platform == nil || n.o.JoinAddr != "" {
		return
	}
	n.mu.Lock()
	n.platform = &machine.PlatformStatus{Searching: true}
	n.mu.Unlock()
	go n.usePlatform(n.life)
}

func (n *Node) usePlatform(ctx context.Context) {
	ans, err := n.o.Platform(ctx)
	st := &machine.PlatformStatus{Source: ans.Source, Tried: ans.Tried}
	defer func() {
		n.mu.Lock()
		n.platform = st
		n.mu.Unlock()
	}()
	fail := func(err error) {
		st.Error = err.Error()
		n.setErr(err)
		n.o.Log.Error("user data not used; the node waits for an operator's Init or Join", "platform", ans.Source, "error", err)
		n.o.Bus.Publish(events.Event{Kind: events.KindPlatform, Outcome: events.Failed, Error: err.Error(),
			Message: "the node stays in maintenance mode"})
	}
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		fail(err)
		return
	case ans.Source == "":
		n.o.Log.Info("no platform gives this node user data; waiting for an operator's Init or Join", "tried", ans.Tried)
		return
	}
	if ans.Hostname != "" && n.Machine() == nil {
		n.setHostname(ans.Hostname)
	}
	if ans.Network != nil && n.o.PlatformNetwork != nil {
		if err := n.o.PlatformNetwork(ctx, ans.Network); err != nil {
			fail(fmt.Errorf("the network config from %s: %w", ans.Source, err))
			return
		}
		n.o.Bus.Publish(events.Event{Kind: events.KindPlatform, Outcome: "network",
			Message: fmt.Sprintf("the network config from %s is applied: %s", ans.Source, describeNetwork(ans.Network))})
	}
	switch {
	case len(ans.UserData) == 0:
		n.o.Log.Info("the platform gives no user data; waiting for an operator's Init or Join", "platform", ans.Source)
		return
	}
	ud, err := config.ParseUserData(ans.UserData)
	if err != nil {
		fail(fmt.Errorf("the user data from %s: %w", ans.Source, err))
		return
	}
	switch {
	case ud.Config != nil:
		st.Action = "init"
		n.o.Bus.Publish(events.Event{Kind: events.KindPlatform, Outcome: "init",
			Message: fmt.Sprintf("the user data from %s inits this node as cluster %s", ans.Source, ud.Config.Cluster.Name)})
		raw, err := withPlatformNetwork(ans.UserData, ans.Network)
		if err == nil {
			err = n.Init(ctx, raw, nil)
		}
		var held *nodelock.HeldError
		var busy *fsm.BusyError
		if err != nil && !errors.As(err, &held) && !errors.As(err, &busy) {
			fail(fmt.Errorf("init from the user data from %s: %w", ans.Source, err))
		}
	case ud.Join != nil:
		j := ud.Join
		st.Action = "join " + j.Endpoint
		if n.o.TicketsFor == nil {
			fail(errors.New("this node cannot join by itself (no ticket client)"))
			return
		}
		n.o.Bus.Publish(events.Event{Kind: events.KindPlatform, Outcome: "join",
			Message: fmt.Sprintf("the user data from %s joins this node to %s", ans.Source, j.Endpoint)})
		n.startJoin(joinTarget{addr: j.Endpoint, token: j.Token, ca: j.CAHash, tickets: n.o.TicketsFor(j.CAHash),
			from: "user data (" + ans.Source + ")", network: ans.Network})
	}
}

// withPlatformNetwork puts the platform's network into a machine config that sets none, so the node
// keeps it at every boot (the platform is searched only before the first Init or Join). A config with
// its own machine.network keeps it.
func withPlatformNetwork(raw []byte, network *config.Network) ([]byte, error) {
	if network == nil {
		return raw, nil
	}
	c, err := ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	m := &c.Machine.Network
	if len(m.Interfaces) > 0 || len(m.Nameservers) > 0 || len(m.Search) > 0 {
		return raw, nil
	}
	*m = *network
	return config.Marshal(c)
}

// describeNetwork is a network config in one line: "eth1 10.9.0.5/24 via 10.9.0.1; resolvers 10.9.0.53".
func describeNetwork(n *config.Network) string {
	var parts []string
	for _, itf := range n.Interfaces {
		s := itf.Name
		if itf.DHCP {
			s += " dhcp"
		}
		for _, a := range itf.Addresses {
			s += " " + a
		}
		if itf.Gateway != "" {
			s += " via " + itf.Gateway
		}
		parts = append(parts, s)
	}
	if len(n.Nameservers) > 0 {
		parts = append(parts, "resolvers "+strings.Join(n.Nameservers, ", "))
	}
	return strings.Join(parts, "; ")
}
