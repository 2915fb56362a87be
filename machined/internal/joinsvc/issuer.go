package joinsvc

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
)

// Issuer makes join tickets on a control-plane node.
type Issuer struct {
	Tokens *Tokens
	// Config is the control plane's own config, with the cluster's secrets.
	Config func() *config.MachineConfig
	// Members lists the cluster's control-plane nodes, for the joining node's discovery names.
	Members func(ctx context.Context) []*machine.Member
	// Etcd adds a joining control plane's etcd member (nil: control-plane joins are refused).
	Etcd EtcdMembership
	// NodeKnown returns an error unless the named node is still in the cluster (its Node object exists);
	// a renewal is refused to a node that left. Nil: not checked.
	NodeKnown func(ctx context.Context, name string) error
	// Rejoin clears what says the named node left the cluster, before it is given a ticket to join
	// again under that name (nil: nothing to clear).
	Rejoin func(ctx context.Context, name string) error
	Now    func() time.Time
}

// EtcdMembership is this control plane's view of the etcd cluster, for control-plane joins.
type EtcdMembership interface {
	// AddLearner adds the member node name will run at address as a learner (or finds it, for a retried
	// join) and returns its ID and every member as --initial-cluster needs them.
	AddLearner(ctx context.Context, name, address string) (uint64, []*machine.EtcdPeer, error)
}

// ErrControlPlaneJoin is returned for control-plane tokens by a node that cannot change etcd's membership.
var ErrControlPlaneJoin = errors.New("this node cannot add etcd members, so it admits no control-plane nodes; join workers here")

// EtcdError is a failed change of etcd's membership: the cluster is not ready for another member now.
type EtcdError struct{ Err error }

func (e *EtcdError) Error() string {
	return "add the node to etcd: " + e.Err.Error()
}
func (e *EtcdError) Unwrap() error { return e.Err }

// ClusterError is a failed read or write of the cluster's state through its API (the join tokens, a
// rejoining node's Node): on a busy control plane the API server answers late, and the same request
// asked again later succeeds. The APIs answer it with RetryLater, and the joining side retries it (make
// e2e-ha saw a third control plane's join end on one timed-out Patch of its Node, and on one timed-out
// read of the join tokens).
type ClusterError struct{ Err error }

func (e *ClusterError) Error() string { return e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }

// Issue checks the token and makes a ticket for the asking node.
func (i *Issuer) Issue(ctx context.Context, req *machine.TicketRequest) (*machine.JoinTicket, error) {
	cfg := i.Config()
	if cfg == nil || cfg.Cluster.Secrets == nil {
		return nil, errors.New("this node is not a configured control plane")
	}
	pub, err := pki.ParsePublicKey(req.MachinePublicKey)
	if err != nil {
		return nil, &DeniedError{Reason: "the request carries no usable machine public key: " + err.Error(), invalid: true}
	}
	if req.NodeName == "" {
		return nil, &DeniedError{Reason: "the request names no node", invalid: true}
	}
	role, err := i.Tokens.Use(ctx, req.Token)
	if err != nil {
		return nil, err // the store says which failures are the cluster's (ClusterStore)
	}
	t, err := i.ticket(ctx, req, cfg, pub, role)
	if err != nil {
		// The token admitted nobody: give its use back, so a node that retries (etcd still busy with
		// another learner) or asks again correctly does not find it spent.
		if rerr := i.Tokens.Refund(context.WithoutCancel(ctx), req.Token); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, err
	}
	return t, nil
}

// ticket makes the ticket for a request whose token admitted role.
func (i *Issuer) ticket(ctx context.Context, req *machine.TicketRequest, cfg *config.MachineConfig, pub crypto.PublicKey, role string) (*machine.JoinTicket, error) {
	if role == RoleControlPlane && i.Etcd == nil {
		return nil, ErrControlPlaneJoin
	}
	if role == RoleControlPlane && (len(req.Addresses) == 0 || net.ParseIP(req.Addresses[0]) == nil) {
		return nil, &DeniedError{Reason: "a control-plane join needs the node's IP address first in addresses: its etcd member listens there", invalid: true}
	}
	s := cfg.Cluster.Secrets
	ca, err := (pki.PEM{Cert: []byte(s.MachineCA.Cert), Key: []byte(s.MachineCA.Key)}).ParseCA()
	if err != nil {
		return nil, fmt.Errorf("machine CA: %w", err)
	}
	certReq := pki.Request{CommonName: req.NodeName, Server: true, Client: true,
		DNSNames: []string{client.ServerName, "localhost", req.NodeName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	for _, a := range req.Addresses {
		if ip := net.ParseIP(a); ip != nil {
			certReq.IPs = append(certReq.IPs, ip)
		}
	}
	der, err := ca.SignPublic(certReq, pub, i.Now())
	if err != nil {
		return nil, err
	}
	joinCfg, err := joinConfig(cfg, role)
	if err != nil {
		return nil, err
	}
	t := &machine.JoinTicket{
		ClusterName: cfg.Cluster.Name, ClusterId: cfg.Cluster.ID, Role: role,
		ApiEndpoints:   []string{cfg.Cluster.Endpoint},
		KubernetesCa:   []byte(s.KubernetesCA.Cert),
		MachineCa:      []byte(s.MachineCA.Cert),
		MachineCert:    pki.EncodeCert(der),
		BootstrapToken: s.BootstrapToken,
		Members:        i.Members(ctx),
		PodCidr:        cfg.Cluster.Network.PodCIDR,
		ServiceCidr:    cfg.Cluster.Network.ServiceCIDR,
		DnsDomain:      cfg.Cluster.Network.DNSDomain,
		Config:         joinCfg,
	}
	if i.Rejoin != nil {
		if err := i.Rejoin(ctx, req.NodeName); err != nil {
			return nil, apiError(err) // a Patch of the Node: told apart as the tokens' calls are
		}
	}
	if role == RoleControlPlane {
		if t.ControlPlane, err = i.controlPlane(ctx, req, s); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// controlPlane is what a control-plane ticket adds: the secrets, and the etcd cluster with the node
// already added as a learner. Last, so nothing is added to etcd for a request refused for another reason.
func (i *Issuer) controlPlane(ctx context.Context, req *machine.TicketRequest, s *config.Secrets) (*machine.ControlPlaneSecrets, error) {
	secrets, err := config.Marshal(s)
	if err != nil {
		return nil, err
	}
	id, members, err := i.Etcd.AddLearner(ctx, req.NodeName, req.Addresses[0])
	if err != nil {
		return nil, &EtcdError{Err: err}
	}
	return &machine.ControlPlaneSecrets{Secrets: secrets, EtcdMembers: members, EtcdMemberId: id}, nil
}

// joinConfig is the config a node that joins by itself (kernel command line) gets: the cluster as the
// control plane knows it and the default disk selectors; a worker's without the cluster's secrets, a
// control plane's with them and an etcd disk. An operator's join sends its own config instead.
func joinConfig(cp *config.MachineConfig, role string) ([]byte, error) {
	c := *cp
	c.Cluster.Join = nil
	c.Machine = config.Machine{Type: role, Disks: config.Disks{State: config.DefaultDisk("state"), Ephemeral: config.DefaultDisk("ephemeral")}}
	if role == RoleControlPlane {
		etcd := config.DefaultDisk("etcd")
		c.Machine.Disks.Etcd = &etcd
	} else {
		c.Cluster.Secrets = nil
	}
	if err := config.Validate(&c); err != nil {
		return nil, fmt.Errorf("%s config: %w", role, err)
	}
	return config.Marshal(&c)
}
