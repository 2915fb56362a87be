package kube

import (
	"crypto/x509"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/google/go-cmp/cmp"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

func TestKubeconfigs(t *testing.T) {
	r := newTestRenderer(t)
	files, err := r.Kubeconfigs(testNow)
	if err != nil {
		t.Fatalf("Kubeconfigs: %v", err)
	}
	admin, err := r.AdminKubeconfig(testNow)
	if err != nil {
		t.Fatalf("AdminKubeconfig: %v", err)
	}
	tests := []struct {
		name   string
		data   []byte
		server string
		cn     string
		org    []string
	}{
		{"admin.conf", files.Get("/etc/kubernetes/admin.conf").Data, "https://api.demo.example:6443", "kubernetes-admin", []string{"system:masters"}},
		{"controller-manager.conf", files.Get("/etc/kubernetes/controller-manager.conf").Data, "https://127.0.0.1:6443", "system:kube-controller-manager", nil},
		{"scheduler.conf", files.Get("/etc/kubernetes/scheduler.conf").Data, "https://127.0.0.1:6443", "system:kube-scheduler", nil},
		{"kubelet.conf", files.Get("/etc/kubernetes/kubelet.conf").Data, "https://127.0.0.1:6443", "system:node:cp-1", []string{"system:nodes"}},
		{"rpc-admin.conf", admin, "https://api.demo.example:6443", "kubernetes-admin", []string{"system:masters"}},
	}
	ca := []byte(r.cfg.Cluster.Secrets.KubernetesCA.Cert)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := decodeKubeconfig(t, tt.data)
			if len(kc.Clusters) != 1 || len(kc.AuthInfos) != 1 || len(kc.Contexts) != 1 {
				t.Fatalf("kubeconfig has %d clusters, %d users, %d contexts; want one each", len(kc.Clusters), len(kc.AuthInfos), len(kc.Contexts))
			}
			if got := kc.Clusters[0].Cluster.Server; got != tt.server {
				t.Errorf("server = %q, want %q", got, tt.server)
			}
			if got := kc.Clusters[0].Cluster.CertificateAuthorityData; string(got) != string(ca) {
				t.Errorf("certificate-authority-data is not the cluster CA")
			}
			if kc.CurrentContext != kc.Contexts[0].Name {
				t.Errorf("current-context = %q, want %q", kc.CurrentContext, kc.Contexts[0].Name)
			}
			auth := kc.AuthInfos[0].AuthInfo
			kp, err := pki.PEM{Cert: auth.ClientCertificateData, Key: auth.ClientKeyData}.Parse()
			if err != nil {
				t.Fatalf("client certificate and key: %v", err)
			}
			if kp.Cert.Subject.CommonName != tt.cn {
				t.Errorf("client CN = %q, want %q", kp.Cert.Subject.CommonName, tt.cn)
			}
			if diff := cmp.Diff(tt.org, kp.Cert.Subject.Organization); diff != "" {
				t.Errorf("client O (-want +got):\n%s", diff)
			}
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(ca)
			if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("client certificate does not verify as a client of the cluster CA: %v", err)
			}
		})
	}
	for _, f := range files {
		if f.Mode != 0o600 {
			t.Errorf("%s mode = %v, want 0600 (it holds a private key)", f.Path, f.Mode)
		}
	}
	golden(t, "kubeconfig/admin.conf", elideKubeconfig(t, files.Get("/etc/kubernetes/admin.conf").Data))
	golden(t, "kubeconfig/kubelet.conf", elideKubeconfig(t, files.Get("/etc/kubernetes/kubelet.conf").Data))
}

func TestBootstrapKubeconfig(t *testing.T) {
	r := newTestRenderer(t)
	ca := []byte(r.cfg.Cluster.Secrets.KubernetesCA.Cert)
	files, err := r.WorkerFiles(ca, "abcdef.0123456789abcdef")
	if err != nil {
		t.Fatalf("WorkerFiles: %v", err)
	}
	if got := files.Get("/etc/kubernetes/pki/ca.crt"); got == nil || string(got.Data) != string(ca) {
		t.Errorf("WorkerFiles has no /etc/kubernetes/pki/ca.crt with the cluster CA")
	}
	f := files.Get("/etc/kubernetes/bootstrap-kubelet.conf")
	if f == nil {
		t.Fatalf("WorkerFiles has no bootstrap-kubelet.conf")
	}
	kc := decodeKubeconfig(t, f.Data)
	if got := kc.AuthInfos[0].AuthInfo.Token; got != "abcdef.0123456789abcdef" {
		t.Errorf("token = %q, want the bootstrap token", got)
	}
	golden(t, "kubeconfig/bootstrap-kubelet.conf", elideKubeconfig(t, f.Data))
	if got, want := kc.Clusters[0].Cluster.Server, r.Endpoint(); got != want {
		t.Errorf("server without discovery names (sandbox mode) = %q, want the cluster endpoint %q", got, want)
	}

	// On a real node the kubelet reaches the API by its discovery name, which outlives the address of
	// the control plane a cluster endpoint often is.
	named := testNode
	named.DiscoveryNames = true
	rn, err := New(testConfig(t), named, paths.Paths{Root: "/"}, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	data, err := rn.BootstrapKubeconfig(ca, "abcdef.0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decodeKubeconfig(t, data).Clusters[0].Cluster.Server, "https://api.internal.demo:6443"; got != want {
		t.Errorf("server with discovery names = %q, want %q", got, want)
	}

	for _, tt := range []struct {
		name, ca, token, wantErr string
	}{
		{"bad CA", "junk", "abcdef.0123456789abcdef", "cluster CA"},
		{"no token", string(ca), "", "token is empty"},
	} {
		if _, err := r.BootstrapKubeconfig([]byte(tt.ca), tt.token); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: BootstrapKubeconfig() error = %v, want one mentioning %q", tt.name, err, tt.wantErr)
		}
	}
}

func decodeKubeconfig(t *testing.T, data []byte) clientcmdv1.Config {
	t.Helper()
	var kc clientcmdv1.Config
	if err := yaml.UnmarshalStrict(data, &kc); err != nil {
		t.Fatalf("decode kubeconfig: %v\n%s", err, data)
	}
	return kc
}

// elideKubeconfig replaces certificate and key bytes (new at every run) so the structure can be golden.
func elideKubeconfig(t *testing.T, data []byte) []byte {
	t.Helper()
	kc := decodeKubeconfig(t, data)
	for i := range kc.Clusters {
		kc.Clusters[i].Cluster.CertificateAuthorityData = []byte("CLUSTER CA")
	}
	for i := range kc.AuthInfos {
		a := &kc.AuthInfos[i].AuthInfo
		if a.ClientCertificateData != nil {
			a.ClientCertificateData = []byte("CLIENT CERTIFICATE")
		}
		if a.ClientKeyData != nil {
			a.ClientKeyData = []byte("CLIENT KEY")
		}
	}
	out, err := yaml.Marshal(kc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
