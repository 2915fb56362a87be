package kube

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/pki"
)

// Subjects of the certificates rendered here (kubeadm's names, so RBAC and habits carry over).
const (
	APIServerCN        = "kube-apiserver"
	APIServerKubeletCN = "kube-apiserver-kubelet-client"
	APIServerEtcdCN    = "kube-apiserver-etcd-client"
	FrontProxyClientCN = "front-proxy-client"
	EtcdHealthcheckCN  = "kube-etcd-healthcheck-client"
	ControllerManager  = "system:kube-controller-manager"
	SchedulerUser      = "system:kube-scheduler"
	AdminCN            = "kubernetes-admin"
	// MastersGroup is bound to cluster-admin by the RBAC bootstrap policy kube-apiserver creates itself,
	// so a certificate in it works from the first second with no binding to POST. kubeadm (1.29+) puts
	// admin.conf in kubeadm:cluster-admins instead and then creates that binding; Cairn has no such step
	// before the admin needs the API, and the kubelet-client certificate needs the same power
	// (kubeadm 1.37 binds its CN to system:kubelet-api-admin after init).
	MastersGroup = "system:masters"
	// NodesGroup and the system:node: prefix are what the Node authorizer and NodeRestriction expect.
	NodesGroup     = "system:nodes"
	nodeUserPrefix = "system:node:"
)

// cas are the cluster's certificate authorities, parsed from the config's secrets.
type cas struct {
	kubernetes, etcd, frontProxy pki.KeyPair
	secrets                      *config.Secrets
}

func (r *Renderer) cas() (*cas, error) {
	s := r.cfg.Cluster.Secrets
	if s == nil {
		return nil, fmt.Errorf("render PKI: cluster.secrets is missing (a control-plane config carries them)")
	}
	parse := func(field string, ck config.CertKey) (pki.KeyPair, error) {
		kp, err := pki.PEM{Cert: []byte(ck.Cert), Key: []byte(ck.Key)}.ParseCA()
		if err != nil {
			return pki.KeyPair{}, fmt.Errorf("render PKI: cluster.secrets.%s: %w", field, err)
		}
		return kp, nil
	}
	var c cas
	var err error
	if c.kubernetes, err = parse("kubernetesCA", s.KubernetesCA); err != nil {
		return nil, err
	}
	if c.etcd, err = parse("etcdCA", s.EtcdCA); err != nil {
		return nil, err
	}
	if c.frontProxy, err = parse("frontProxyCA", s.FrontProxyCA); err != nil {
		return nil, err
	}
	c.secrets = s
	return &c, nil
}

// leaf is one certificate to derive on the node.
type leaf struct {
	cert, key string
	ca        *pki.KeyPair
	req       pki.Request
}

// PKI renders the control plane's PKI in kubeadm's layout under /etc/kubernetes/pki: the three CAs and
// the service-account key from the config's secrets, and every leaf certificate freshly signed with a
// new key. Everything but the key and certificate bytes is a function of the config and the node.
func (r *Renderer) PKI(now time.Time) (Files, error) {
	c, err := r.cas()
	if err != nil {
		return nil, err
	}
	s := c.secrets
	files := Files{
		r.pkiFile(CACert, []byte(s.KubernetesCA.Cert), modePublic),
		r.pkiFile(CAKey, []byte(s.KubernetesCA.Key), modeSecret),
		r.pkiFile(EtcdCACert, []byte(s.EtcdCA.Cert), modePublic),
		r.pkiFile(EtcdCAKey, []byte(s.EtcdCA.Key), modeSecret),
		r.pkiFile(FrontProxyCACert, []byte(s.FrontProxyCA.Cert), modePublic),
		r.pkiFile(FrontProxyCAKey, []byte(s.FrontProxyCA.Key), modeSecret),
	}

	saKey, err := pki.ParseKey([]byte(s.ServiceAccountKey))
	if err != nil {
		return nil, fmt.Errorf("render PKI: cluster.secrets.serviceAccountKey: %w", err)
	}
	saPub, err := pki.EncodePublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("render PKI: %s: %w", ServiceAccountPublic, err)
	}
	files = append(files,
		r.pkiFile(ServiceAccountKey, []byte(s.ServiceAccountKey), modeSecret),
		r.pkiFile(ServiceAccountPublic, saPub, modePublic))

	for _, l := range r.leaves(c) {
		p, err := l.ca.Sign(l.req, now)
		if err != nil {
			return nil, fmt.Errorf("render PKI: %s: %w", l.cert, err)
		}
		files = append(files, r.pkiFile(l.cert, p.Cert, modePublic), r.pkiFile(l.key, p.Key, modeSecret))
	}
	return files.sorted(), nil
}

func (r *Renderer) leaves(c *cas) []leaf {
	etcdDNS, etcdIPs := r.etcdSANs()
	return []leaf{
		{APIServerCert, APIServerKey, &c.kubernetes, pki.Request{
			CommonName: APIServerCN, Server: true, DNSNames: r.apiServerDNSNames(), IPs: r.apiServerIPs(),
		}},
		{APIServerKubeletCert, APIServerKubeletKey, &c.kubernetes, pki.Request{
			CommonName: APIServerKubeletCN, Organization: []string{MastersGroup}, Client: true,
		}},
		{APIServerEtcdCert, APIServerEtcdKey, &c.etcd, pki.Request{CommonName: APIServerEtcdCN, Client: true}},
		{FrontProxyClientCert, FrontProxyClientKey, &c.frontProxy, pki.Request{CommonName: FrontProxyClientCN, Client: true}},
		// etcd's server and peer certificates are also its client certificates (to itself and to peers).
		{EtcdServerCert, EtcdServerKey, &c.etcd, pki.Request{
			CommonName: r.node.Name, DNSNames: etcdDNS, IPs: etcdIPs, Server: true, Client: true,
		}},
		{EtcdPeerCert, EtcdPeerKey, &c.etcd, pki.Request{
			CommonName: r.node.Name, DNSNames: etcdDNS, IPs: etcdIPs, Server: true, Client: true,
		}},
		{EtcdHealthcheckCert, EtcdHealthcheckKey, &c.etcd, pki.Request{CommonName: EtcdHealthcheckCN, Client: true}},
		{ControllerManagerServerCert, ControllerManagerServerKey, &c.kubernetes, pki.Request{
			CommonName: KubeControllerManager, DNSNames: []string{"localhost"}, IPs: loopbacks, Server: true,
		}},
		{SchedulerServerCert, SchedulerServerKey, &c.kubernetes, pki.Request{
			CommonName: KubeScheduler, DNSNames: []string{"localhost"}, IPs: loopbacks, Server: true,
		}},
	}
}

// loopbacks are the addresses the controller-manager and the scheduler serve on (bind-address).
var loopbacks = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}

func (r *Renderer) pkiFile(name string, data []byte, mode os.FileMode) File {
	return File{Path: r.layout.PKIFile(name), Data: data, Mode: mode}
}

// apiServerDNSNames are the serving certificate's names: the in-cluster Service names, the node's
// name, localhost, the discovery name (api.internal.<cluster>, always: a node in sandbox mode may be
// reached by it from real ones), the endpoint's host when it is a name, and apiServer.certSANs names.
func (r *Renderer) apiServerDNSNames() []string {
	names := []string{
		"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc." + r.dnsDomain, r.node.Name, "localhost", r.InternalName(),
	}
	extra := append([]string{r.endpointHst}, r.cfg.Cluster.APIServer.CertSANs...)
	for _, s := range extra {
		if _, err := netip.ParseAddr(s); err != nil {
			names = appendUnique(names, s)
		}
	}
	return names
}

// apiServerIPs: the kubernetes Service address, the node's addresses, loopback, the endpoint's host
// when it is an address, and apiServer.certSANs addresses.
func (r *Renderer) apiServerIPs() []net.IP {
	ips := []netip.Addr{r.APIServerServiceIP()}
	ips = append(ips, r.nodeIPs()...)
	ips = append(ips, netip.MustParseAddr("127.0.0.1"))
	if r.primary.Is6() {
		ips = append(ips, netip.IPv6Loopback())
	}
	extra := append([]string{r.endpointHst}, r.cfg.Cluster.APIServer.CertSANs...)
	for _, s := range extra {
		if a, err := netip.ParseAddr(s); err == nil && !containsAddr(ips, a.Unmap()) {
			ips = append(ips, a.Unmap())
		}
	}
	return toNetIPs(ips)
}

// etcdSANs: the node's name and addresses, the cluster's EtcdName and both loopbacks, for the server and
// peer certificates.
func (r *Renderer) etcdSANs() ([]string, []net.IP) {
	ips := r.nodeIPs()
	for _, lo := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()} {
		if !containsAddr(ips, lo) {
			ips = append(ips, lo)
		}
	}
	return []string{r.node.Name, r.EtcdName(), "localhost"}, toNetIPs(ips)
}

func toNetIPs(addrs []netip.Addr) []net.IP {
	out := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, net.IP(a.AsSlice()))
	}
	return out
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
