package workload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func servingCSR(t *testing.T, user string, subject pkix.Name, dns []string, ips []string, usages ...certv1.KeyUsage) certv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: subject, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	if usages == nil {
		usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
	}
	return certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{
		Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), SignerName: kubeletServingSigner,
		Username: user, Groups: []string{"system:nodes", "system:authenticated"}, Usages: usages}}
}

func TestServingCSRProblem(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.5.0.3"}, {Type: corev1.NodeHostName, Address: "w1"}}}}
	self := pkix.Name{CommonName: "system:node:w1", Organization: []string{"system:nodes"}}
	tests := []struct {
		name string
		csr  certv1.CertificateSigningRequest
		want string // "" = approve
	}{
		{"the node's name and address", servingCSR(t, "system:node:w1", self, []string{"w1"}, []string{"10.5.0.3"}), ""},
		{"asked by another node", servingCSR(t, "system:node:w2", self, []string{"w1"}, []string{"10.5.0.3"}), `requested by "system:node:w2"`},
		{"another node's address", servingCSR(t, "system:node:w1", self, []string{"w1"}, []string{"10.5.0.4"}), "address 10.5.0.4 is not node w1's"},
		{"a name that is not the node's", servingCSR(t, "system:node:w1", self, []string{"kubernetes.default"}, nil), `name "kubernetes.default" is not node w1's`},
		{"client usage", servingCSR(t, "system:node:w1", self, []string{"w1"}, nil, certv1.UsageClientAuth), `usage "client auth" is not for serving`},
		{"a subject of another node", servingCSR(t, "system:node:w1", pkix.Name{CommonName: "system:node:w2", Organization: []string{"system:nodes"}},
			[]string{"w1"}, nil), "is not CN=system:node:w1"},
		{"nothing to serve", servingCSR(t, "system:node:w1", self, nil, nil), "names no name or address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := servingCSRProblem(tc.csr, node)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("servingCSRProblem() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRunningWorkWithoutKubernetes: a node that runs no Kubernetes (sandbox mode without a payload) goes
// through its Running work without touching a cluster that is not there.
func TestRunningWorkWithoutKubernetes(t *testing.T) {
	w := &Workload{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now}
	ctx := context.Background()
	w.approveServingCSRs(ctx)
	w.nodePass(ctx)
	if _, err := w.NodeExists(ctx, "n1"); err == nil {
		t.Error("NodeExists() without Kubernetes = nil error")
	}
	if _, err := w.nodeClient(); err == nil {
		t.Error("nodeClient() without Kubernetes = nil error")
	}
}
