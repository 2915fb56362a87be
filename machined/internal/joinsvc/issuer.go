package joinsvc

import (
	"context"
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
	Now     func() time.Time
}

// ErrControlPlaneJoin is returned for control-plane tokens until that path exists.
var ErrControlPlaneJoin = errors.New("joining extra control-plane nodes is not available yet; join workers, or run a single control plane")

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
	role, err := i.Tokens.Use(req.Token)
	if err != nil {
		return nil, err
	}
	if role == RoleControlPlane {
		return nil, ErrControlPlaneJoin
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
	workerCfg, err := workerConfig(cfg, role)
	if err != nil {
		return nil, err
	}
	return &machine.JoinTicket{
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
		Config:         workerCfg,
	}, nil
}

// workerConfig is the config a node that joins by itself (kernel command line) gets: the cluster as the
// control plane knows it, without its secrets, and the default disk selectors. An operator's join sends
// its own worker.yaml instead.
func workerConfig(cp *config.MachineConfig, role string) ([]byte, error) {
	c := *cp
	c.Cluster.Secrets = nil
	c.Cluster.Join = nil
	c.Machine = config.Machine{Type: role, Disks: config.Disks{State: config.DefaultDisk("state"), Ephemeral: config.DefaultDisk("ephemeral")}}
	if err := config.Validate(&c); err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	return config.Marshal(&c)
}
