package kube

import (
	"crypto"
	"crypto/x509"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/google/go-cmp/cmp"
)

func TestPKIFileSet(t *testing.T) {
	files, err := newTestRenderer(t).PKI(testNow)
	if err != nil {
		t.Fatalf("PKI: %v", err)
	}
	var got []string
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, "/etc/kubernetes/pki/")
		got = append(got, rel)
		wantMode := os.FileMode(0o644)
		if strings.HasSuffix(rel, ".key") {
			wantMode = 0o600
		}
		if f.Mode != wantMode {
			t.Errorf("%s mode = %v, want %v", rel, f.Mode, wantMode)
		}
	}
	want := []string{
		"apiserver-etcd-client.crt", "apiserver-etcd-client.key",
		"apiserver-kubelet-client.crt", "apiserver-kubelet-client.key",
		"apiserver.crt", "apiserver.key", "ca.crt", "ca.key",
		"controller-manager-server.crt", "controller-manager-server.key",
		"etcd/ca.crt", "etcd/ca.key", "etcd/healthcheck-client.crt", "etcd/healthcheck-client.key",
		"etcd/peer.crt", "etcd/peer.key", "etcd/server.crt", "etcd/server.key",
		"front-proxy-ca.crt", "front-proxy-ca.key", "front-proxy-client.crt", "front-proxy-client.key",
		"sa.key", "sa.pub", "scheduler-server.crt", "scheduler-server.key",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PKI files (-want +got):\n%s", diff)
	}
}

// certWant is what a user of each certificate relies on.
type certWant struct {
	ca       string
	cn       string
	org      []string
	usages   []x509.ExtKeyUsage
	dnsNames []string
	ips      []string
}

func TestPKICertificates(t *testing.T) {
	files, err := newTestRenderer(t).PKI(testNow)
	if err != nil {
		t.Fatalf("PKI: %v", err)
	}
	server, client := x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth
	etcdIPs := []string{"192.168.50.10", "10.0.2.15", "127.0.0.1", "::1"}
	tests := map[string]certWant{
		APIServerCert: {
			ca: CACert, cn: "kube-apiserver", usages: []x509.ExtKeyUsage{server},
			dnsNames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local", "cp-1", "localhost", "api.internal.demo", "api.demo.example", "lb.demo.example"},
			ips: []string{"10.96.0.1", "192.168.50.10", "10.0.2.15", "127.0.0.1", "203.0.113.7"},
		},
		APIServerKubeletCert: {ca: CACert, cn: "kube-apiserver-kubelet-client", org: []string{"system:masters"},
			usages: []x509.ExtKeyUsage{client}},
		APIServerEtcdCert:    {ca: EtcdCACert, cn: "kube-apiserver-etcd-client", usages: []x509.ExtKeyUsage{client}},
		FrontProxyClientCert: {ca: FrontProxyCACert, cn: "front-proxy-client", usages: []x509.ExtKeyUsage{client}},
		EtcdServerCert: {ca: EtcdCACert, cn: "cp-1", usages: []x509.ExtKeyUsage{server, client},
			dnsNames: []string{"cp-1", "etcd.internal.demo", "localhost"}, ips: etcdIPs},
		EtcdPeerCert: {ca: EtcdCACert, cn: "cp-1", usages: []x509.ExtKeyUsage{server, client},
			dnsNames: []string{"cp-1", "etcd.internal.demo", "localhost"}, ips: etcdIPs},
		EtcdHealthcheckCert: {ca: EtcdCACert, cn: "kube-etcd-healthcheck-client", usages: []x509.ExtKeyUsage{client}},
		ControllerManagerServerCert: {ca: CACert, cn: "kube-controller-manager", usages: []x509.ExtKeyUsage{server},
			dnsNames: []string{"localhost"}, ips: []string{"127.0.0.1", "::1"}},
		SchedulerServerCert: {ca: CACert, cn: "kube-scheduler", usages: []x509.ExtKeyUsage{server},
			dnsNames: []string{"localhost"}, ips: []string{"127.0.0.1", "::1"}},
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			cert := mustCert(t, files, name)
			verifyChain(t, files, cert, want.ca, want.usages)
			if cert.Subject.CommonName != want.cn {
				t.Errorf("CN = %q, want %q", cert.Subject.CommonName, want.cn)
			}
			if diff := cmp.Diff(want.org, cert.Subject.Organization); diff != "" {
				t.Errorf("O (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.usages, cert.ExtKeyUsage); diff != "" {
				t.Errorf("extended key usages (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.dnsNames, cert.DNSNames); diff != "" {
				t.Errorf("DNS SANs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want.ips, ipStrings(cert.IPAddresses)); diff != "" {
				t.Errorf("IP SANs (-want +got):\n%s", diff)
			}
			if !cert.NotAfter.After(testNow.Add(300 * 24 * time.Hour)) {
				t.Errorf("NotAfter = %v, want about a year after %v", cert.NotAfter, testNow)
			}
			key := strings.TrimSuffix(name, ".crt") + ".key"
			if _, err := (pki.PEM{Cert: files.Get(pkiPath(name)).Data, Key: files.Get(pkiPath(key)).Data}).Parse(); err != nil {
				t.Errorf("%s and %s: %v", name, key, err)
			}
		})
	}
}

// The CAs must be the config's, byte for byte: every node of the cluster trusts them.
func TestPKICAsFromSecrets(t *testing.T) {
	r := newTestRenderer(t)
	files, err := r.PKI(testNow)
	if err != nil {
		t.Fatalf("PKI: %v", err)
	}
	s := r.cfg.Cluster.Secrets
	for name, want := range map[string]string{
		CACert: s.KubernetesCA.Cert, CAKey: s.KubernetesCA.Key, EtcdCACert: s.EtcdCA.Cert,
		EtcdCAKey: s.EtcdCA.Key, FrontProxyCACert: s.FrontProxyCA.Cert, FrontProxyCAKey: s.FrontProxyCA.Key,
		ServiceAccountKey: s.ServiceAccountKey,
	} {
		if got := string(files.Get(pkiPath(name)).Data); got != want {
			t.Errorf("%s differs from the config's secret", name)
		}
	}
}

func TestServiceAccountKeyPair(t *testing.T) {
	files, err := newTestRenderer(t).PKI(testNow)
	if err != nil {
		t.Fatalf("PKI: %v", err)
	}
	key, err := pki.ParseKey(files.Get(pkiPath(ServiceAccountKey)).Data)
	if err != nil {
		t.Fatalf("sa.key: %v", err)
	}
	pub, err := pki.ParsePublicKey(files.Get(pkiPath(ServiceAccountPublic)).Data)
	if err != nil {
		t.Fatalf("sa.pub: %v", err)
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if eq, ok := pub.(equaler); !ok || !eq.Equal(key.Public()) {
		t.Errorf("sa.pub is not the public half of sa.key")
	}
}

func TestPKIErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(r *Renderer)
		wantErr string
	}{
		{"no secrets", func(r *Renderer) { r.cfg.Cluster.Secrets = nil }, "cluster.secrets is missing"},
		{"bad etcd CA", func(r *Renderer) { r.cfg.Cluster.Secrets.EtcdCA.Key = "junk" }, "cluster.secrets.etcdCA"},
		{"bad SA key", func(r *Renderer) { r.cfg.Cluster.Secrets.ServiceAccountKey = "junk" }, "cluster.secrets.serviceAccountKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRenderer(t)
			tt.mutate(r)
			_, err := r.PKI(testNow)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("PKI() error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// Under a sandbox root, the PKI lands under the root.
func TestPKIUnderRoot(t *testing.T) {
	files, err := newRendererAt(t, "/tmp/sbx").PKI(testNow)
	if err != nil {
		t.Fatalf("PKI: %v", err)
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, "/tmp/sbx/etc/kubernetes/pki/") {
			t.Errorf("PKI file %s is outside /tmp/sbx/etc/kubernetes/pki", f.Path)
		}
	}
}

func pkiPath(name string) string { return filepath.Join("/etc/kubernetes/pki", name) }

func mustCert(t *testing.T, files Files, name string) *x509.Certificate {
	t.Helper()
	f := files.Get(pkiPath(name))
	if f == nil {
		t.Fatalf("no %s", name)
	}
	c, err := pki.ParseCert(f.Data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func verifyChain(t *testing.T, files Files, cert *x509.Certificate, caName string, usages []x509.ExtKeyUsage) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(mustCert(t, files, caName))
	for _, u := range usages {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			t.Errorf("verify against %s for usage %v: %v", caName, u, err)
		}
	}
	// A certificate must not chain to another CA of the cluster (e.g. an etcd cert to the cluster CA).
	for _, other := range []string{CACert, EtcdCACert, FrontProxyCACert} {
		if other == caName {
			continue
		}
		pool := x509.NewCertPool()
		pool.AddCert(mustCert(t, files, other))
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
			t.Errorf("certificate also verifies against %s", other)
		}
	}
}

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// A node whose PKI an older Cairn wrote lacks the files and names added since, and a node whose
// address changed has serving certificates without it; StalePKI names them so the boot's certificate
// check reissues the set before the static pods that need them start.
func TestStalePKI(t *testing.T) {
	root := t.TempDir()
	r := newRendererAt(t, root)
	files, err := r.PKI(testNow)
	if err != nil {
		t.Fatalf("PKI: %v", err)
	}
	if got := r.StalePKI(); len(got) != 18 {
		t.Errorf("StalePKI() before writing = %v, want the 18 leaf files (9 certificates and their keys)", got)
	}
	if err := WriteFiles(files); err != nil {
		t.Fatal(err)
	}
	if got := r.StalePKI(); len(got) != 0 {
		t.Errorf("StalePKI() after writing = %v, want none", got)
	}
	if err := os.Remove(r.layout.PKIFile(SchedulerServerKey)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{SchedulerServerKey}, r.StalePKI()); diff != "" {
		t.Errorf("StalePKI() without the scheduler's key (-want +got):\n%s", diff)
	}
	if err := WriteFiles(files); err != nil {
		t.Fatal(err)
	}

	// The same node with a new address: the certificates that carry the node's addresses are stale.
	moved := testNode
	moved.IPs = []netip.Addr{netip.MustParseAddr("10.5.0.99")}
	r2, err := New(testConfig(t), moved, paths.Paths{Root: root}, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{APIServerCert, EtcdServerCert, EtcdPeerCert}
	if diff := cmp.Diff(want, r2.StalePKI()); diff != "" {
		t.Errorf("StalePKI() after the node's address changed (-want +got):\n%s", diff)
	}

	// A PKI an older Cairn wrote, without the discovery name in the API server's certificate.
	old := r.leaves(&cas{})[0]
	if old.cert != APIServerCert {
		t.Fatalf("first leaf = %s, want %s", old.cert, APIServerCert)
	}
	c, err := r.cas()
	if err != nil {
		t.Fatal(err)
	}
	old.req.DNSNames = slices.DeleteFunc(slices.Clone(old.req.DNSNames), func(n string) bool { return n == r.InternalName() })
	p, err := c.kubernetes.Sign(old.req, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.layout.PKIFile(APIServerCert), p.Cert, 0o644); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{APIServerCert}, r.StalePKI()); diff != "" {
		t.Errorf("StalePKI() with an API server certificate without %s (-want +got):\n%s", r.InternalName(), diff)
	}
}
