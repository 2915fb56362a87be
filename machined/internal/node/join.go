package node

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
)

// TicketFile holds the join ticket beside the node lock, so an interrupted Join resumes.
const TicketFile = "join-ticket.pb"

// TicketSource asks a control-plane node's join service for a ticket.
type TicketSource interface {
	RequestTicket(ctx context.Context, addr string, req *machine.TicketRequest) (*machine.JoinTicket, error)
}

// CertRenewer asks a control plane's join service to renew a joined node's machine-API certificate
// (joinsvc.Client), checking the service against the machine CA.
type CertRenewer interface {
	RenewCertificate(ctx context.Context, addr string, machineCA []byte, req *machine.RenewRequest) ([]byte, error)
}

type ticket = machine.JoinTicket

// Join validates a ticket and the node's config (the ticket's own when raw is empty), takes the node lock
// for Join and starts the Join sequence in the background. Errors are those of Init.
func (n *Node) Join(ctx context.Context, raw, ticketBytes []byte) error {
	t := &machine.JoinTicket{}
	if err := proto.Unmarshal(ticketBytes, t); err != nil || len(ticketBytes) == 0 {
		err := &ConfigError{Err: fmt.Errorf("the join ticket is missing or unreadable: %v", err)}
		n.refused(fsm.SeqJoin, err)
		return err
	}
	return n.join(ctx, raw, t)
}

func (n *Node) join(ctx context.Context, raw []byte, t *machine.JoinTicket) error {
	if len(raw) == 0 {
		raw = t.Config
	}
	cfg, err := ParseConfig(raw)
	if err == nil {
		err = n.checkTicket(cfg, t)
	}
	if err != nil {
		n.refused(fsm.SeqJoin, err)
		return err
	}
	tb, err := proto.Marshal(t)
	if err != nil {
		return err
	}
	return n.takeLock(ctx, fsm.SeqJoin, nodelock.OwnerJoin, cfg, raw, map[string][]byte{TicketFile: tb}, t)
}

// checkTicket makes sure the ticket is for this cluster and this node's key, and chains to the machine CA.
func (n *Node) checkTicket(cfg *config.MachineConfig, t *machine.JoinTicket) error {
	bad := func(format string, args ...any) error {
		return &ConfigError{Err: fmt.Errorf("join ticket: "+format, args...)}
	}
	if t.ClusterId != cfg.Cluster.ID {
		return bad("it is for cluster %q (%s), the config for %q (%s)", t.ClusterName, t.ClusterId, cfg.Cluster.Name, cfg.Cluster.ID)
	}
	if t.Role != cfg.Machine.Type {
		return bad("it admits a %s, the config describes a %s", t.Role, cfg.Machine.Type)
	}
	if t.Role == config.TypeControlPlane && (t.ControlPlane == nil || len(t.ControlPlane.EtcdMembers) == 0 || t.ControlPlane.EtcdMemberId == 0) {
		return bad("a control-plane ticket must name the etcd cluster to join and this node's member in it")
	}
	cert, err := pki.ParseCert(t.MachineCert)
	if err != nil {
		return bad("machine certificate: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(t.MachineCa) {
		return bad("no machine CA")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, CurrentTime: n.o.Now()}); err != nil {
		return bad("machine certificate does not chain to the machine CA: %v", err)
	}
	n.mu.Lock()
	key := n.identity
	n.mu.Unlock()
	if key == nil || !key.PublicKey.Equal(cert.PublicKey) {
		return bad("the machine certificate is for another node's key (tickets are made for one node)")
	}
	return nil
}

func (n *Node) storeTicketCertificate(t *machine.JoinTicket) error {
	return n.writeCertificate(t.MachineCert, t.MachineCa)
}

// Ticket is the join ticket a joined node keeps in STATE.
func (n *Node) Ticket() (*machine.JoinTicket, error) { return n.loadTicket() }

func (n *Node) loadTicket() (*machine.JoinTicket, error) {
	data, err := os.ReadFile(filepath.Join(n.nodeLock().Dir(), TicketFile))
	if err != nil {
		return nil, fmt.Errorf("resume Join: %w", err)
	}
	t := &machine.JoinTicket{}
	if err := proto.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("resume Join: the stored ticket is unreadable: %w", err)
	}
	return t, nil
}

// Backoff bounds for the join client.
const (
	joinBackoffMin = time.Second
	joinBackoffMax = 30 * time.Second
)

// JoinCAInsecure, as cairn.joinca=, lets a node join by itself without checking the join service's CA
// (joinsvc.InsecureCA).
const JoinCAInsecure = "insecure"

// ErrJoinUnpinned refuses a self-join that does not pin the cluster's CA.
var ErrJoinUnpinned = errors.New("cairn.join= is set without cairn.joinca=: the node does not know whom it would join, " +
	"so it does not ask (anyone on the path could hand it a ticket for their own cluster); add cairn.joinca= with the hash " +
	"'cairnctl join-token create' prints, or cairn.joinca=" + JoinCAInsecure + " to skip the check; the node waits for an operator's Join")

// joinTarget is a cluster a node joins by itself: from its kernel command line or from user data.
type joinTarget struct {
	addr, token, ca string
	tickets         TicketSource
	from            string // where it was told to: fromCmdline, "user data (nocloud)"
	// network is the platform's network (user data joins): the joined config keeps it when it sets none.
	network *config.Network
}

// fromCmdline: a join the kernel command line asks for.
const fromCmdline = "cairn.join="

// startJoinClient asks the join service of the kernel command line for a ticket (startJoin).
func (n *Node) startJoinClient() {
	if n.o.JoinAddr == "" || n.o.Tickets == nil {
		return
	}
	n.startJoin(joinTarget{addr: n.o.JoinAddr, token: n.o.JoinToken, ca: n.o.JoinCA, tickets: n.o.Tickets, from: fromCmdline})
}

// startJoin asks a join service for a ticket until it gets one or the lock is taken (by an operator's
// Init or Join), retrying with capped exponential backoff and jitter. A node told to join without a
// pinned CA refuses, and says why in status (kubeadm's --discovery-token-ca-cert-hash rule).
func (n *Node) startJoin(t joinTarget) {
	switch t.ca {
	case "":
		n.setErr(ErrJoinUnpinned)
		n.o.Log.Error("not joining by itself", "join", t.addr, "from", t.from, "error", ErrJoinUnpinned)
		n.o.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: events.Failed, Error: ErrJoinUnpinned.Error()})
		return
	case JoinCAInsecure:
		n.o.Log.Warn("joining without checking the join service's CA", "join", t.addr, "from", t.from)
	}
	ctx, cancel := context.WithCancel(n.life)
	n.mu.Lock()
	n.stopJoin = cancel
	n.selfJoin = &t
	n.mu.Unlock()
	go n.joinLoop(ctx, t)
}

func (n *Node) stopJoinClient() {
	n.mu.Lock()
	stop := n.stopJoin
	n.stopJoin = nil
	n.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (n *Node) joinLoop(ctx context.Context, to joinTarget) {
	delay := joinBackoffMin
	for attempt := 1; ; attempt++ {
		n.mu.Lock()
		key := n.identity
		host := n.hostname
		n.mu.Unlock()
		pub, _ := publicKeyPEM(key)
		req := &machine.TicketRequest{Token: to.token, NodeName: host, MachinePublicKey: pub}
		for _, ip := range n.o.Addresses() {
			req.Addresses = append(req.Addresses, ip.String())
		}
		t, err := to.tickets.RequestTicket(ctx, to.addr, req)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			var raw []byte
			if raw, err = withPlatformNetwork(t.Config, to.network); err == nil {
				err = n.join(ctx, raw, t)
			}
			var held *nodelock.HeldError
			var busy *fsm.BusyError
			if err == nil || errors.As(err, &held) || errors.As(err, &busy) {
				return // joined, or an operator's Init/Join won the lock
			}
		}
		n.o.Bus.Publish(events.Event{Kind: events.KindJoin, Outcome: events.Failed, Error: err.Error(),
			Message: fmt.Sprintf("join attempt %d to %s failed; retrying in %s", attempt, to.addr, delay)})
		n.o.Log.Warn("join attempt failed", "attempt", attempt, "join", to.addr, "error", err, "retry", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(delay)):
		}
		delay = min(2*delay, joinBackoffMax)
	}
}

func jitter(d time.Duration) time.Duration { return d/2 + rand.N(d/2+1) }
