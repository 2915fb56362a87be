package config

import (
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/api/upgrade"
)

var (
	dnsLabel  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	clusterID = regexp.MustCompile(`^[0-9a-f]{16}$`)
	// bootstrapToken is kubeadm's token format, ID.SECRET.
	bootstrapToken = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)
)

// Validate checks every value of a parsed config and returns all problems at once as Errors.
func Validate(c *MachineConfig) error {
	var e Errors
	m, cl := &c.Machine, &c.Cluster
	// With an unknown type, only the rules common to both types are checked.
	controlPlane, worker := m.Type == TypeControlPlane, m.Type == TypeWorker

	switch m.Type {
	case TypeControlPlane, TypeWorker:
	default:
		e.add("machine.type", "must be %q or %q, got %q", TypeControlPlane, TypeWorker, m.Type)
	}
	if m.Hostname != "" && !validHostname(m.Hostname) {
		e.add("machine.hostname", "%q is not a valid DNS name", m.Hostname)
	}
	for i, san := range m.CertSANs {
		if net.ParseIP(san) == nil && !validHostname(san) {
			e.add(indexPath("machine.certSANs", i), "%q is neither an IP address nor a DNS name", san)
		}
	}
	validateNetwork(&m.Network, &e)
	validateTime(&m.Time, &e)
	validateDisk("machine.disks.state", &m.Disks.State, &e)
	validateDisk("machine.disks.ephemeral", &m.Disks.Ephemeral, &e)
	switch {
	case controlPlane && m.Disks.Etcd == nil:
		e.add("machine.disks.etcd", "a control-plane node needs an etcd disk (a selector, or %q)", TmpfsVolume)
	case worker && m.Disks.Etcd != nil:
		e.add("machine.disks.etcd", "a worker runs no etcd; remove this field")
	case m.Disks.Etcd != nil:
		validateDisk("machine.disks.etcd", m.Disks.Etcd, &e)
	}
	if m.Kubelet.NodeIP != "" && net.ParseIP(m.Kubelet.NodeIP) == nil {
		e.add("machine.kubelet.nodeIP", "%q is not an IP address", m.Kubelet.NodeIP)
	}
	if m.Kubelet.MaxPods < 0 {
		e.add("machine.kubelet.maxPods", "must not be negative")
	}
	validateArgs("machine.kubelet.extraArgs", m.Kubelet.ExtraArgs, &e)
	validateNodeSpec(m, &e)

	if !dnsLabel.MatchString(cl.Name) {
		e.add("cluster.name", "%q must be a DNS label: lowercase letters, digits and '-', at most 63", cl.Name)
	}
	if !clusterID.MatchString(cl.ID) {
		e.add("cluster.id", "%q must be 16 lowercase hex digits (cairnctl gen config makes one)", cl.ID)
	}
	validateEndpoint(cl.Endpoint, &e)
	validateVIP(cl.VIP, cl.Endpoint, &e)
	if v := cl.KubernetesVersion; v != "" && v != KubernetesVersion {
		e.add("cluster.kubernetesVersion", "%q is not a version this image carries; it carries %s", v, KubernetesVersion)
	}
	validateClusterNetwork(&cl.Network, &e)
	validateJoinAttestation(&cl.JoinAttestation, &e)
	if _, err := pki.ParseCert([]byte(cl.MachineCA)); err != nil {
		e.add("cluster.machineCA", "%v", err)
	}
	switch {
	case controlPlane && cl.Secrets == nil:
		e.add("cluster.secrets", "a control-plane config must carry the cluster secrets")
	case worker && cl.Secrets != nil:
		e.add("cluster.secrets", "a worker config must not carry the cluster's secrets; a worker gets what it needs when it joins")
	case cl.Secrets != nil:
		validateSecrets("cluster.secrets", cl.Secrets, &e)
		if ca, err := pki.ParseCert([]byte(cl.MachineCA)); err == nil {
			if sca, err := pki.ParseCert([]byte(cl.Secrets.MachineCA.Cert)); err == nil && !ca.Equal(sca) {
				e.add("cluster.machineCA", "differs from cluster.secrets.machineCA.cert")
			}
		}
	}
	if cl.Join != nil {
		for i, ep := range cl.Join.Endpoints {
			if _, _, err := SplitHostPort(ep, JoinPort); err != nil {
				e.add(indexPath("cluster.join.endpoints", i), "%v", err)
			}
		}
	}
	validateArgs("cluster.apiServer.extraArgs", cl.APIServer.ExtraArgs, &e)
	validateArgs("cluster.controllerManager.extraArgs", cl.ControllerManager.ExtraArgs, &e)
	validateArgs("cluster.scheduler.extraArgs", cl.Scheduler.ExtraArgs, &e)
	validateArgs("cluster.etcd.extraArgs", cl.Etcd.ExtraArgs, &e)
	validateArgs("cluster.proxy.extraArgs", cl.Proxy.ExtraArgs, &e)
	switch cl.Proxy.Mode {
	case "", ProxyNFTables, ProxyIPTables:
	default:
		e.add("cluster.proxy.mode", "must be %q or %q, got %q", ProxyNFTables, ProxyIPTables, cl.Proxy.Mode)
	}
	if cl.CoreDNS.Replicas < 0 {
		e.add("cluster.coreDNS.replicas", "must not be negative")
	}
	validateRegistries(m.Registries, &e)
	if k := m.Upgrade.PublicKey; k != "" {
		if _, err := upgrade.ParsePublicKey(k); err != nil {
			e.add("machine.upgrade.publicKey", "%v", err)
		}
	}
	if in := m.Install.Disk; in.Path != "" && !strings.HasPrefix(in.Path, "/dev/") {
		e.add("machine.install.disk.path", "%q must be a device path under /dev/", in.Path)
	}
	if in := m.Install.Disk; in.MaxSize != 0 && in.MinSize > in.MaxSize {
		e.add("machine.install.disk.minSize", "%s is larger than maxSize %s", in.MinSize, in.MaxSize)
	}
	if cl.Etcd.QuotaBackendBytes < 0 {
		e.add("cluster.etcd.quotaBackendBytes", "must not be negative")
	}
	return e.orNil()
}

// ValidateSecrets checks a secrets document.
func ValidateSecrets(s *Secrets) error {
	var e Errors
	validateSecrets("", s, &e)
	return e.orNil()
}

func validateSecrets(path string, s *Secrets, e *Errors) {
	for _, ca := range []struct {
		name string
		ck   CertKey
	}{{"machineCA", s.MachineCA}, {"kubernetesCA", s.KubernetesCA}, {"etcdCA", s.EtcdCA}, {"frontProxyCA", s.FrontProxyCA}} {
		if _, err := (pki.PEM{Cert: []byte(ca.ck.Cert), Key: []byte(ca.ck.Key)}).ParseCA(); err != nil {
			e.add(join(path, ca.name), "%v", err)
		}
	}
	if _, err := pki.ParseKey([]byte(s.ServiceAccountKey)); err != nil {
		e.add(join(path, "serviceAccountKey"), "%v", err)
	}
	if !bootstrapToken.MatchString(s.BootstrapToken) {
		e.add(join(path, "bootstrapToken"), "must look like abcdef.0123456789abcdef (6 and 16 lowercase letters or digits)")
	}
}

// Validate checks a network on its own (one a platform's metadata gives), with the same rules as a
// machine config's machine.network; the errors' paths start at machine.network.
func (n *Network) Validate() error {
	var e Errors
	validateNetwork(n, &e)
	if len(e) > 0 {
		return e
	}
	return nil
}

func validateNetwork(n *Network, e *Errors) {
	names := map[string]bool{}
	members := map[string]string{} // NIC -> the bond it belongs to
	seen := map[string]bool{}
	for _, itf := range n.Interfaces {
		names[itf.Name] = true
	}
	for i, itf := range n.Interfaces {
		p := indexPath("machine.network.interfaces", i)
		if itf.Name == "" {
			e.add(p+".name", "must be set")
		} else if len(itf.Name) > 15 || strings.ContainsAny(itf.Name, "/: \t") {
			e.add(p+".name", "%q is not a Linux interface name (at most 15 characters, no '/', ':' or spaces)", itf.Name)
		}
		if seen[itf.Name] {
			e.add(p+".name", "%q is listed twice", itf.Name)
		}
		seen[itf.Name] = true
		if itf.Bond != nil && itf.VLAN != nil {
			e.add(p, "set either bond or vlan, not both")
		}
		if b := itf.Bond; b != nil {
			if b.Mode != BondActiveBackup && b.Mode != BondLACP {
				e.add(p+".bond.mode", "%q: Cairn creates %s or %s bonds", b.Mode, BondActiveBackup, BondLACP)
			}
			if len(b.Interfaces) == 0 {
				e.add(p+".bond.interfaces", "list the NICs the bond is made of")
			}
			for j, m := range b.Interfaces {
				mp := indexPath(p+".bond.interfaces", j)
				switch {
				case names[m]:
					e.add(mp, "%q is configured in machine.network.interfaces too: a bond's member carries no configuration of its own", m)
				case members[m] != "":
					e.add(mp, "%q is already a member of bond %q", m, members[m])
				}
				members[m] = itf.Name
			}
		}
		if v := itf.VLAN; v != nil {
			if v.ID < 1 || v.ID > 4094 {
				e.add(p+".vlan.id", "%d is outside 1..4094", v.ID)
			}
			if v.Parent == "" {
				e.add(p+".vlan.parent", "must name the interface the VLAN is on")
			} else if v.Parent == itf.Name {
				e.add(p+".vlan.parent", "a VLAN cannot be its own parent")
			}
		}
		for j, r := range itf.Routes {
			rp := indexPath(p+".routes", j)
			if _, err := netip.ParsePrefix(r.Network); err != nil {
				e.add(rp+".network", "%q is not a network in CIDR notation such as 10.20.0.0/16", r.Network)
			}
			if r.Gateway != "" && net.ParseIP(r.Gateway) == nil {
				e.add(rp+".gateway", "%q is not an IP address", r.Gateway)
			}
			if r.Metric < 0 {
				e.add(rp+".metric", "%d is negative", r.Metric)
			}
		}
		if itf.DHCP && len(itf.Addresses) > 0 {
			e.add(p+".addresses", "set either dhcp or static addresses, not both")
		}
		for j, a := range itf.Addresses {
			if _, err := netip.ParsePrefix(a); err != nil {
				e.add(indexPath(p+".addresses", j), "%q is not an address in CIDR notation such as 10.5.0.2/24", a)
			}
		}
		if itf.Gateway != "" && net.ParseIP(itf.Gateway) == nil {
			e.add(p+".gateway", "%q is not an IP address", itf.Gateway)
		}
		if itf.MTU != 0 && (itf.MTU < 576 || itf.MTU > 9216) {
			e.add(p+".mtu", "%d is outside 576..9216", itf.MTU)
		}
	}
	for i, ns := range n.Nameservers {
		if net.ParseIP(ns) == nil {
			e.add(indexPath("machine.network.nameservers", i), "%q is not an IP address", ns)
		}
	}
	for i, d := range n.Search {
		if d == "" || strings.ContainsAny(d, " \t/") || len(d) > 253 {
			e.add(indexPath("machine.network.search", i), "%q is not a domain name", d)
		}
	}
}

func validateDisk(path string, d *DiskSpec, e *Errors) {
	if d.Tmpfs {
		return
	}
	if d.Selector.IsZero() {
		e.add(path, "select a disk (path, serial, model, wwn, label, minSize/maxSize) or say %q for a RAM-backed volume", TmpfsVolume)
	}
	if d.Path != "" && !strings.HasPrefix(d.Path, "/dev/") {
		e.add(path+".path", "%q must be a device path under /dev/", d.Path)
	}
	if d.MaxSize != 0 && d.MinSize > d.MaxSize {
		e.add(path+".minSize", "%s is larger than maxSize %s", d.MinSize, d.MaxSize)
	}
	switch d.Filesystem {
	case "", FilesystemXFS, FilesystemExt4:
	default:
		e.add(path+".filesystem", "must be %q or %q, got %q", FilesystemXFS, FilesystemExt4, d.Filesystem)
	}
	switch {
	case d.Encryption == "":
	case d.Encryption != EncryptionTPM:
		e.add(path+".encryption", "must be %q (LUKS2, the key sealed to the TPM) or absent, got %q", EncryptionTPM, d.Encryption)
	case path != "machine.disks.state":
		// EPHEMERAL is rebuilt at every reset and ETCD's data is the cluster's, replicated and snapshotted;
		// STATE holds the node's keys and its lock.
		e.add(path+".encryption", "only machine.disks.state can be encrypted")
	}
}

func validateEndpoint(ep string, e *Errors) {
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" {
		e.add("cluster.endpoint", "%q must be a URL like https://HOST:6443", ep)
		return
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			e.add("cluster.endpoint", "port %q is not a port number", p)
		}
	}
}

// validateVIP checks cluster.vip: one unicast address, and the endpoint's host when that is an address
// (a name is the user's DNS, pointing at the VIP).
func validateVIP(vip, endpoint string, e *Errors) {
	if vip == "" {
		return
	}
	a, err := netip.ParseAddr(vip)
	if err != nil || a.Zone() != "" || !a.IsGlobalUnicast() && !a.IsPrivate() {
		e.add("cluster.vip", "%q is not a unicast IP address", vip)
		return
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return // validateEndpoint says so
	}
	if h, err := netip.ParseAddr(u.Hostname()); err == nil && h != a {
		e.add("cluster.vip", "%s is not cluster.endpoint's address %s: with a VIP, the endpoint is https://%s:6443", a, h, netJoinHost(a))
	}
}

// netJoinHost brackets an IPv6 address for a URL.
func netJoinHost(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

func validateClusterNetwork(n *ClusterNetwork, e *Errors) {
	pod, errPod := netip.ParsePrefix(n.PodCIDR)
	if n.PodCIDR != "" && errPod != nil {
		e.add("cluster.network.podCIDR", "%q is not a CIDR such as 10.244.0.0/16", n.PodCIDR)
	}
	svc, errSvc := netip.ParsePrefix(n.ServiceCIDR)
	if n.ServiceCIDR != "" && errSvc != nil {
		e.add("cluster.network.serviceCIDR", "%q is not a CIDR such as 10.96.0.0/12", n.ServiceCIDR)
	}
	if errPod == nil && errSvc == nil && pod.Overlaps(svc) {
		e.add("cluster.network.podCIDR", "%s overlaps the service CIDR %s", pod, svc)
	}
	if n.DNSDomain != "" && !validHostname(n.DNSDomain) {
		e.add("cluster.network.dnsDomain", "%q is not a DNS name", n.DNSDomain)
	}
	switch n.CNI {
	case "", CNIFlannel, CNIBridge, CNINone:
	default:
		e.add("cluster.network.cni", "must be %q, %q or %q, got %q", CNIFlannel, CNIBridge, CNINone, n.CNI)
	}
	if m := n.NodeCIDRMaskSize; m != 0 {
		if errPod == nil && (m <= pod.Bits() || m > 30) {
			e.add("cluster.network.nodeCIDRMaskSize", "%d must be longer than the pod CIDR's /%d and at most 30", m, pod.Bits())
		}
	}
}

func validateArgs(path string, args map[string]string, e *Errors) {
	for k := range args {
		if k == "" || strings.HasPrefix(k, "-") || strings.ContainsAny(k, "= ") {
			e.add(path, "flag name %q must be given without leading dashes, '=' or spaces", k)
		}
	}
}

// SplitHostPort splits HOST[:PORT], filling in the default port.
func SplitHostPort(s string, defPort int) (string, int, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, port = strings.Trim(s, "[]"), strconv.Itoa(defPort)
		} else {
			return "", 0, err
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || host == "" {
		return "", 0, &net.AddrError{Err: "want HOST or HOST:PORT", Addr: s}
	}
	return host, n, nil
}

func validHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel.MatchString(l) {
			return false
		}
	}
	return true
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func validateTime(t *Time, e *Errors) {
	for i, srv := range t.Servers {
		p := indexPath("machine.time.servers", i)
		host, port := srv, ""
		if h, pt, err := net.SplitHostPort(srv); err == nil {
			host, port = h, pt
		}
		if host == "" || strings.ContainsAny(host, " /\t") {
			e.add(p, "%q is not a host or host:port", srv)
		}
		if port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				e.add(p, "%q: the port must be a number in 1..65535", srv)
			}
		}
	}
	if t.BootWait != "" {
		if d, err := time.ParseDuration(t.BootWait); err != nil || d < 0 || d > 10*time.Minute {
			e.add("machine.time.bootWait", "%q is not a duration from 0s to 10m such as 10s", t.BootWait)
		}
	}
}
