// Package cluster is the logic behind `cairnctl cluster create|destroy|list` and `cairnctl join`: a local
// cluster's layout (names, L2 addresses, MACs, its multicast group), its configs, its state on disk, and
// the steps that boot QEMU nodes, init the first control plane and join the others. It knows nothing of
// cobra, so each piece is tested on its own.
package cluster

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"regexp"
)

// Roles of a node.
const (
	RoleControlPlane = "controlplane"
	RoleWorker       = "worker"
)

// Subnet is the cluster L2 every local cluster uses: each cluster has its own multicast group, so the
// same addresses never meet. The first control plane is .2 and is the cluster endpoint.
var Subnet = netip.MustParsePrefix("10.5.0.0/24")

// firstHost is the host number of the first node; .1 is left for a gateway someone may add.
const firstHost = 2

// mcastGroup is the multicast address of every cluster's L2; clusters differ by port.
const mcastGroup = "230.0.0.1"

// Multicast ports are taken from [portBase, portBase+portSpan): away from the ephemeral range
// (32768+) that the host hands out for forwarded ports.
const (
	portBase = 20000
	portSpan = 10000
)

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)

// Node is one planned node.
type Node struct {
	Name    string     `json:"name"` // also its hostname and Kubernetes node name
	Role    string     `json:"role"`
	Address netip.Addr `json:"address"` // on the cluster L2
	MAC     string     `json:"mac"`     // of its L2 NIC
}

// Prefix is the node's address with the L2's prefix length, as ip= and qemu.L2 take it.
func (n Node) Prefix() string { return netip.PrefixFrom(n.Address, Subnet.Bits()).String() }

// Layout is the network plan of a cluster.
type Layout struct {
	Group string `json:"group"` // multicast HOST:PORT of the cluster L2
	Nodes []Node `json:"nodes"`
	// VIP is the control planes' shared address on the L2 (cluster.vip), if the cluster has one.
	VIP netip.Addr `json:"vip,omitzero"`
}

// Endpoint is the Kubernetes API endpoint: the VIP, else the first control plane's L2 address.
func (l Layout) Endpoint() string {
	if l.VIP.IsValid() {
		return fmt.Sprintf("https://%s:6443", l.VIP)
	}
	return fmt.Sprintf("https://%s:6443", l.Nodes[0].Address)
}

// SetVIP gives the cluster a virtual IP for its API: an address of the L2 that no node has. Nodes
// added later skip it (Grow).
func (l *Layout) SetVIP(s string) error {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return fmt.Errorf("--vip %q is not an IP address", s)
	case !Subnet.Contains(a) || a == Subnet.Masked().Addr() || a == broadcast():
		return fmt.Errorf("--vip %s is not a host address of the cluster's L2 %s", a, Subnet)
	}
	for _, n := range l.Nodes {
		if n.Address == a {
			return fmt.Errorf("--vip %s is node %s's address; pick one above the nodes' (e.g. %s)", a, n.Name, defaultVIPHint())
		}
	}
	l.VIP = a
	return nil
}

func defaultVIPHint() netip.Addr { return broadcast().Prev().Prev().Prev().Prev().Prev() }

// CheckName says whether name can name a cluster: it becomes part of node names, which are DNS labels.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("cluster name %q must be 1-32 lowercase letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// Plan lays out a cluster: node names NAME-cp1.. then NAME-w1.., addresses from .2 up in that order,
// MACs unique within the cluster, and a multicast port derived from the name that no cluster in
// usedGroups has.
func Plan(name string, controlPlanes, workers int, usedGroups []string) (Layout, error) {
	if err := CheckName(name); err != nil {
		return Layout{}, err
	}
	if controlPlanes < 1 {
		return Layout{}, fmt.Errorf("a cluster needs at least one control plane, not %d", controlPlanes)
	}
	if workers < 0 {
		return Layout{}, fmt.Errorf("workers must not be negative, not %d", workers)
	}
	total := controlPlanes + workers
	if maxNodes := 1<<(32-Subnet.Bits()) - firstHost - 1; total > maxNodes {
		return Layout{}, fmt.Errorf("%d nodes do not fit the L2 %s (at most %d)", total, Subnet, maxNodes)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	sum := h.Sum32()
	used := map[string]bool{}
	for _, g := range usedGroups {
		used[g] = true
	}
	var l Layout
	for i := 0; i < portSpan; i++ {
		g := fmt.Sprintf("%s:%d", mcastGroup, portBase+(int(sum)+i)%portSpan)
		if !used[g] {
			l.Group = g
			break
		}
	}
	if l.Group == "" {
		return Layout{}, fmt.Errorf("every multicast port in %d-%d is taken by another cluster", portBase, portBase+portSpan-1)
	}
	addr := Subnet.Addr()
	for i := 0; i < firstHost; i++ {
		addr = addr.Next()
	}
	for i := 0; i < total; i++ {
		role, index := RoleControlPlane, i+1
		if i >= controlPlanes {
			role, index = RoleWorker, i-controlPlanes+1
		}
		l.Nodes = append(l.Nodes, newNode(name, sum, role, index, addr))
		addr = addr.Next()
	}
	return l, nil
}

// newNode is the index-th node of role (from 1) at addr.
func newNode(cluster string, sum uint32, role string, index int, addr netip.Addr) Node {
	n := Node{Role: role, Name: fmt.Sprintf("%s-cp%d", cluster, index), Address: addr}
	if role == RoleWorker {
		n.Name = fmt.Sprintf("%s-w%d", cluster, index)
	}
	// Locally administered QEMU prefix, two bytes of the name's hash, then the node's host number:
	// unique within the cluster, and unlikely to repeat across clusters in a capture.
	n.MAC = fmt.Sprintf("52:54:%02x:%02x:00:%02x", byte(sum>>8), byte(sum), addr.As4()[3])
	return n
}

// Grow plans one more node of role for cluster name, whose nodes are nodes: the next number of that role
// and the address after the highest one in use, skipping the cluster's VIP.
func Grow(name string, nodes []Node, role string, vip netip.Addr) (Node, error) {
	if role != RoleControlPlane && role != RoleWorker {
		return Node{}, fmt.Errorf("role must be %s or %s, not %q", RoleWorker, RoleControlPlane, role)
	}
	if len(nodes) == 0 {
		return Node{}, fmt.Errorf("cluster %s has no nodes to grow from", name)
	}
	index, last := 1, nodes[0].Address
	for _, n := range nodes {
		if n.Role == role {
			index++
		}
		if last.Less(n.Address) {
			last = n.Address
		}
	}
	addr := last.Next()
	if addr == vip {
		addr = addr.Next()
	}
	if !Subnet.Contains(addr) || addr == broadcast() {
		return Node{}, fmt.Errorf("cluster %s has no address left on the L2 %s", name, Subnet)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return newNode(name, h.Sum32(), role, index, addr), nil
}

// broadcast is the L2's broadcast address, which no node takes.
func broadcast() netip.Addr {
	a := Subnet.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) | (1<<(32-Subnet.Bits()) - 1)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a)
}
