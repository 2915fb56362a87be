package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
)

// JoinTokenTTL is how long the join token made for one join lives: long enough for a slow ticket
// request under emulation, short enough that a leaked token is soon worthless. It is used once.
const JoinTokenTTL = 10 * time.Minute

// JoinTarget says how to reach the three parties of a join.
type JoinTarget struct {
	// Node is the joining node's maintenance API (bootstrap token and pinned fingerprint).
	Node client.Options
	// ControlPlane is a control-plane node's machine API, HOST[:PORT] (port 50000 by default), reached
	// with Context's client certificate.
	ControlPlane string
	// JoinService is that node's join service, HOST:PORT; its certificate is verified against
	// Context's machine CA.
	JoinService string
	Context     *client.Context
	// RecoveryKey is sent with the Join for an encrypted STATE ("" for none).
	RecoveryKey string
	// Retrying is told, in a line, each time the control plane was too busy to issue a ticket and is
	// asked again.
	Retrying func(notice string)
}

// JoinNode joins the node at t.Node to the cluster with cfg (a machine config, YAML), calling event for
// each event of the node's Join sequence. With detach it returns once the node has taken its lock.
func JoinNode(ctx context.Context, t JoinTarget, cfg []byte, detach bool, event func(*machine.Event)) error {
	if t.Context == nil {
		return errors.New("join: no cairnconfig context: the control plane is reached with its client certificate")
	}
	node, nodeConn, err := client.Connect(t.Node)
	if err != nil {
		return fmt.Errorf("joining node %s: %w", t.Node.Endpoint, err)
	}
	defer nodeConn.Close()
	cp, cpConn, err := client.Connect(client.Options{Endpoint: t.ControlPlane, Context: t.Context})
	if err != nil {
		return fmt.Errorf("control plane %s: %w", t.ControlPlane, err)
	}
	defer cpConn.Close()
	jsConn, err := DialJoinService(t.JoinService, t.Context)
	if err != nil {
		return err
	}
	defer jsConn.Close()
	return Join(ctx, Joiner{
		Node: node, NodeName: t.Node.Endpoint,
		ControlPlane: cp, ControlPlaneName: t.ControlPlane,
		JoinService: machine.NewJoinServiceClient(jsConn), JoinServiceName: t.JoinService,
		RecoveryKey: t.RecoveryKey, Retrying: t.Retrying,
	}, cfg, detach, event)
}

// DialJoinService opens a connection to a control plane's join service, verifying its certificate
// against the cluster's machine CA under the name every node's certificate carries.
func DialJoinService(addr string, c *client.Context) (*grpc.ClientConn, error) {
	target, err := client.WithDefaultPort(addr, client.JoinPort)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(c.CA)) {
		return nil, errors.New("cairnconfig: the machine CA is not a PEM certificate")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: client.ServerName}
	conn, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		return nil, fmt.Errorf("join service %s: %w", target, err)
	}
	return conn, nil
}

// Joiner holds the clients of a join and the names used in its errors.
type Joiner struct {
	Node             machine.MachineClient // maintenance API of the joining node
	NodeName         string
	ControlPlane     machine.MachineClient // an admin connection to a control-plane node
	ControlPlaneName string
	JoinService      machine.JoinServiceClient
	JoinServiceName  string
	// RecoveryKey is sent with the Join for an encrypted STATE ("" for none).
	RecoveryKey string
	// Retrying is told, in a line, each refusal a join asks again after (nil: nothing is told).
	Retrying func(notice string)
	// RetryFor bounds the retries (zero: TicketRetryFor).
	RetryFor time.Duration
}

// Join runs the operator's side of a join: a single-use token from the control plane, the node's public
// key from its maintenance API, a ticket for that key from the join service, and the node's Join RPC
// with config and ticket, whose events it passes to event.
func Join(ctx context.Context, j Joiner, cfgYAML []byte, detach bool, event func(*machine.Event)) error {
	cfg, err := config.Parse(cfgYAML)
	if err != nil {
		return fmt.Errorf("join config: %w", err)
	}
	role := cfg.Machine.Type
	if role != config.TypeControlPlane && role != config.TypeWorker {
		return fmt.Errorf("join config: machine.type must be %s or %s, not %q", config.TypeControlPlane, config.TypeWorker, role)
	}
	st, err := j.Node.Status(ctx, &machine.StatusRequest{})
	if err != nil {
		return fmt.Errorf("joining node %s: status: %w", j.NodeName, err)
	}
	if st.State != "Boot" || st.LockedBy != "" {
		return fmt.Errorf("joining node %s is in %s (locked by %q): only an unconfigured node in Boot can join", j.NodeName, st.State, st.LockedBy)
	}
	if len(st.MachinePublicKey) == 0 {
		return fmt.Errorf("joining node %s reports no machine public key: its machined is too old to join", j.NodeName)
	}
	name := cfg.Machine.Hostname
	if name == "" {
		name = st.Hostname
	}
	ticket, err := j.ticket(ctx, role, name, nodeAddresses(cfg, st), st.MachinePublicKey)
	if err != nil {
		return err
	}
	if ticket.Role != role {
		return fmt.Errorf("join service %s issued a %s ticket, but the config is for a %s", j.JoinServiceName, ticket.Role, role)
	}
	if id := cfg.Cluster.ID; id != "" && ticket.ClusterId != id {
		return fmt.Errorf("the control plane belongs to cluster %s (%s), but the config to cluster %s (%s): wrong --cluster or config",
			ticket.ClusterName, ticket.ClusterId, cfg.Cluster.Name, id)
	}
	raw, err := proto.Marshal(ticket)
	if err != nil {
		return fmt.Errorf("serialize the join ticket: %w", err)
	}
	s, err := j.Node.Join(ctx, &machine.JoinRequest{Config: cfgYAML, Ticket: raw, Detach: detach, StateRecoveryKey: j.RecoveryKey})
	if err != nil {
		return fmt.Errorf("joining node %s: %w", j.NodeName, err)
	}
	for {
		e, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("joining node %s: %w", j.NodeName, err)
		}
		if event != nil {
			event(e)
		}
	}
}

// TicketRetryFor is how long a join asks again for a ticket the join service could not issue yet.
const TicketRetryFor = 5 * time.Minute

// ticket asks the control plane for a single-use token and its join service for a ticket with it. A
// join service that says to retry later (retryLater: its API server or etcd too busy to answer now, or
// etcd still taking another member) is asked again, with a new token each time (the last one stays
// spent when the API could not take its use back), after the pause the join service asks for, for
// RetryFor; each retry is reported to Retrying.
func (j Joiner) ticket(ctx context.Context, role, name string, addrs []string, key []byte) (*machine.JoinTicket, error) {
	deadline := time.Now().Add(cmp.Or(j.RetryFor, TicketRetryFor))
	for {
		ticket, err := j.ticketOnce(ctx, role, name, addrs, key)
		reason, pause, retry := retryLater(err)
		if !retry || time.Now().After(deadline) {
			return ticket, err
		}
		if j.Retrying != nil {
			j.Retrying(fmt.Sprintf("the control plane is too busy to issue a ticket (%s); asking again in %v", reason, pause))
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
	}
}

// retryLater is the join service's reason and the pause it asked for with a RetryInfo detail of its
// Unavailable, its word for a request that was fine while the cluster was too busy. A transport's
// Unavailable (a refused connection, a certificate from another CA) carries none, and no retry mends it.
func retryLater(err error) (reason string, pause time.Duration, retry bool) {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) || se.GRPCStatus().Code() != codes.Unavailable {
		return "", 0, false
	}
	st := se.GRPCStatus()
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return st.Message(), ri.GetRetryDelay().AsDuration(), true
		}
	}
	return "", 0, false
}

func (j Joiner) ticketOnce(ctx context.Context, role, name string, addrs []string, key []byte) (*machine.JoinTicket, error) {
	tok, err := j.ControlPlane.CreateJoinToken(ctx, &machine.CreateJoinTokenRequest{
		Role: role, TtlSeconds: uint32(JoinTokenTTL / time.Second), Uses: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("control plane %s: create a %s join token: %w", j.ControlPlaneName, role, err)
	}
	att, attErr := relayAttestation(ctx, j)
	ticket, err := j.JoinService.RequestTicket(ctx, &machine.TicketRequest{
		Token: tok.Token, NodeName: name, Addresses: addrs, MachinePublicKey: key, Attestation: att,
	})
	if err != nil && attErr != nil {
		return nil, fmt.Errorf("join service %s: request a ticket for %s: %w (and the node could not attest: %v)", j.JoinServiceName, name, err, attErr)
	}
	if err != nil {
		return nil, fmt.Errorf("join service %s: request a ticket for %s: %w", j.JoinServiceName, name, err)
	}
	return ticket, nil
}

// nodeAddresses are the addresses the node's certificate and member entry should carry: the configured
// node IP first (on a VM with a NAT interface it is the one other nodes reach), then what it reports.
func nodeAddresses(cfg *config.MachineConfig, st *machine.StatusResponse) []string {
	var out []string
	if ip := cfg.Machine.Kubelet.NodeIP; ip != "" {
		out = append(out, ip)
	}
	for _, a := range st.Addresses {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}
