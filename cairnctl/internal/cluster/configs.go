package cluster

import (
	"fmt"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/pki"
)

// Configs are a local cluster's generated files: the shared ones and one machine config per node.
type Configs struct {
	Secrets      *config.Secrets
	ControlPlane *config.MachineConfig // the template every control plane's config is made from
	Worker       *config.MachineConfig
	Nodes        map[string]*config.MachineConfig // by node name
}

// GenerateConfigs makes the cluster's secrets and configs: the endpoint is the VIP or else the first
// control plane's L2 address, and each node's config names its host and pins kubelet's node IP to its L2 address (the
// user-network address, 10.0.2.15, is the same on every VM). encryptState asks for every node's STATE
// encrypted with its TPM.
func GenerateConfigs(name string, l Layout, now time.Time, encryptState bool) (*Configs, error) {
	gen, err := config.Generate(config.GenOptions{ClusterName: name, Endpoint: l.Endpoint(), Now: now}, nil)
	if err != nil {
		return nil, fmt.Errorf("generate the configs of cluster %s: %w", name, err)
	}
	if l.VIP.IsValid() {
		gen.ControlPlane.Cluster.VIP, gen.Worker.Cluster.VIP = l.VIP.String(), l.VIP.String()
	}
	emulationTimings(&gen.ControlPlane.Cluster)
	if encryptState {
		gen.ControlPlane.Machine.Disks.State.Encryption, gen.Worker.Machine.Disks.State.Encryption = config.EncryptionTPM, config.EncryptionTPM
	}
	c := &Configs{Secrets: gen.Secrets, ControlPlane: gen.ControlPlane, Worker: gen.Worker, Nodes: map[string]*config.MachineConfig{}}
	for _, n := range l.Nodes {
		nc, err := NodeConfig(c.template(n.Role), n)
		if err != nil {
			return nil, err
		}
		c.Nodes[n.Name] = nc
	}
	return c, nil
}

// emulationTimings suit etcd and the API server to nodes whose CPUs QEMU emulates (TCG), where a vCPU
// stalls for seconds while the host runs the other VMs. etcd's defaults (a 100 ms heartbeat, a 1 s
// election timeout) are for real hardware: under TCG a three-member cluster changed leaders dozens of
// times in minutes and served reads in 5-8 s, so a joining API server never became ready. The API
// server's etcd checks (2 s by default) get the same slack.
func emulationTimings(c *config.Cluster) {
	set := func(m *map[string]string, kv ...string) {
		if *m == nil {
			*m = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			if _, ok := (*m)[kv[i]]; !ok {
				(*m)[kv[i]] = kv[i+1]
			}
		}
	}
	set(&c.Etcd.ExtraArgs, "heartbeat-interval", "500", "election-timeout", "5000")
	set(&c.APIServer.ExtraArgs, "etcd-healthcheck-timeout", "10s", "etcd-readycheck-timeout", "10s")
}

func (c *Configs) template(role string) *config.MachineConfig {
	if role == RoleControlPlane {
		return c.ControlPlane
	}
	return c.Worker
}

// NodeConfig derives one node's config from its role's template, leaving the template untouched.
func NodeConfig(template *config.MachineConfig, n Node) (*config.MachineConfig, error) {
	// A round trip through YAML is a deep copy that cannot miss a field added later.
	data, err := config.Marshal(template)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	nc, err := config.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("node %s: copy the %s template: %w", n.Name, n.Role, err)
	}
	nc.Machine.Hostname = n.Name
	nc.Machine.Kubelet.NodeIP = n.Address.String()
	if err := config.Validate(nc); err != nil {
		return nil, fmt.Errorf("node %s: config: %w", n.Name, err)
	}
	return nc, nil
}

// ClientContext is the cairnconfig context of a local cluster: an admin certificate from the machine CA
// and every node's forwarded API port on the host.
func ClientContext(s *config.Secrets, endpoints []string, now time.Time) (*client.Context, error) {
	ca := pki.PEM{Cert: []byte(s.MachineCA.Cert), Key: []byte(s.MachineCA.Key)}
	ctx, err := client.NewContext(ca, client.RoleAdmin, endpoints, now)
	if err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	return ctx, nil
}
