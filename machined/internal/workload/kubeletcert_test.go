package workload

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/cairn-os/cairn/api/pki"
)

// newCA makes a cluster CA, as PEM and parsed.
func newCA(t *testing.T, now time.Time) (pki.PEM, pki.KeyPair) {
	t.Helper()
	p, err := pki.NewCA("kubernetes", now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	kp, err := p.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	return p, kp
}

// pairFor signs a client pair for node name at now, valid for validity.
func pairFor(t *testing.T, ca pki.KeyPair, name string, now time.Time, validity time.Duration) pki.PEM {
	t.Helper()
	p, err := ca.Sign(pki.Request{CommonName: "system:node:" + name, Organization: []string{"system:nodes"},
		Client: true, Validity: validity}, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// writeKubeconfig writes a kubeconfig trusting ca and embedding p (none when p is zero: a worker's, naming
// the store).
func writeKubeconfig(t *testing.T, path string, ca []byte, p pki.PEM) {
	t.Helper()
	u := clientcmdv1.AuthInfo{ClientCertificateData: p.Cert, ClientKeyData: p.Key}
	if p.Cert == nil {
		u = clientcmdv1.AuthInfo{ClientCertificate: "/var/lib/kubelet/pki/kubelet-client-current.pem",
			ClientKey: "/var/lib/kubelet/pki/kubelet-client-current.pem"}
	}
	data, err := yaml.Marshal(clientcmdv1.Config{
		Clusters:  []clientcmdv1.NamedCluster{{Name: "local", Cluster: clientcmdv1.Cluster{CertificateAuthorityData: ca}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: "node", AuthInfo: u}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// storeWith makes the store's current pair p, as the kubelet would after rotating to it.
func storeWith(t *testing.T, dir string, p pki.PEM) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	name := "kubelet-client-2026-01-01-00-00-00.pem"
	if err := os.WriteFile(filepath.Join(dir, name), append(append([]byte{}, p.Cert...), p.Key...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(name, filepath.Join(dir, kubeletClientCurrent)); err != nil {
		t.Fatal(err)
	}
}

func TestSeedKubeletClient(t *testing.T) {
	now := time.Date(2026, 11, 29, 16, 30, 0, 0, time.UTC)
	caPEM, ca := newCA(t, now)
	embedded := pairFor(t, ca, "cp-1", now, pki.LeafValidity)
	rotated := pairFor(t, ca, "cp-1", now, 2*pki.LeafValidity) // the kubelet's own, expiring later
	older := pairFor(t, ca, "cp-1", now.Add(-300*24*time.Hour), pki.LeafValidity)
	renamed := pairFor(t, ca, "cp-0", now, 2*pki.LeafValidity)
	_, other := newCA(t, now)
	foreign := pairFor(t, other, "cp-1", now, 2*pki.LeafValidity) // a cluster made again since

	tests := []struct {
		name     string
		conf     *pki.PEM // nil: no kubelet.conf; a zero PEM: one naming the store (a worker's)
		store    *pki.PEM // the store's current pair, if any
		garbage  bool     // the store's current file is not a pair
		want     *pki.PEM // the store's current pair afterwards (nil: none)
		wantSeed bool
	}{
		{name: "new control plane: empty store", conf: &embedded, want: &embedded, wantSeed: true},
		{name: "later boot: the same pair", conf: &embedded, store: &embedded, want: &embedded},
		{name: "the kubelet rotated it", conf: &embedded, store: &rotated, want: &rotated},
		{name: "kubelet.conf renewed since", conf: &embedded, store: &older, want: &embedded, wantSeed: true},
		{name: "a pair for another name", conf: &embedded, store: &renamed, want: &embedded, wantSeed: true},
		{name: "a pair from another CA", conf: &embedded, store: &foreign, want: &embedded, wantSeed: true},
		{name: "an unreadable pair", conf: &embedded, garbage: true, want: &embedded, wantSeed: true},
		{name: "worker: the kubelet's own bootstrap", conf: &pki.PEM{}},
		{name: "no kubelet.conf yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			conf, dir := filepath.Join(tmp, "kubelet.conf"), filepath.Join(tmp, "kubelet", "pki")
			if tt.conf != nil {
				writeKubeconfig(t, conf, caPEM.Cert, *tt.conf)
			}
			if tt.store != nil {
				storeWith(t, dir, *tt.store)
			}
			current := filepath.Join(dir, kubeletClientCurrent)
			if tt.garbage {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(current, []byte("not a pair"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := seedKubeletClient(conf, dir, now)
			if err != nil {
				t.Fatalf("seedKubeletClient() = %v", err)
			}
			if (got != "") != tt.wantSeed {
				t.Errorf("seedKubeletClient() wrote %q, want a file written: %v", got, tt.wantSeed)
			}
			if tt.want == nil {
				if _, err := os.Lstat(dir); !os.IsNotExist(err) {
					t.Errorf("the store exists (%v), want the kubelet to make it", err)
				}
				return
			}
			have, err := tls.LoadX509KeyPair(current, current)
			if err != nil {
				t.Fatalf("the store's current pair: %v", err)
			}
			wantPair, err := tls.X509KeyPair(tt.want.Cert, tt.want.Key)
			if err != nil {
				t.Fatal(err)
			}
			if !have.Leaf.Equal(wantPair.Leaf) {
				t.Errorf("the store's current certificate is %s until %s, want %s until %s", have.Leaf.Subject,
					have.Leaf.NotAfter, wantPair.Leaf.Subject, wantPair.Leaf.NotAfter)
			}
			// The kubelet replaces only a symlink when it rotates.
			if fi, err := os.Lstat(current); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("%s is not a symlink (%v)", current, err)
			}
			if tt.wantSeed {
				if fi, err := os.Stat(got); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("the seeded pair %s: %v, want mode 0600", got, err)
				}
			}
		})
	}
}
