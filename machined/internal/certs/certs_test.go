package certs

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/pki"
)

var issued = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestDue(t *testing.T) {
	// A one-year leaf as pki.Sign issues it: valid from an hour before issue.
	leaf := Cert{NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(pki.LeafValidity)}
	ca := leaf
	ca.CA = true
	renewAt := leaf.NotAfter.Add(-(pki.LeafValidity + time.Hour) / 3)
	for _, tc := range []struct {
		name string
		c    Cert
		now  time.Time
		want bool
	}{
		{"fresh leaf", leaf, issued, false},
		{"leaf a minute before two thirds of its life", leaf, renewAt.Add(-time.Minute), false},
		{"leaf at two thirds of its life", leaf, renewAt, true},
		{"expired leaf", leaf, leaf.NotAfter.Add(time.Hour), true},
		{"a CA is never the node's to renew", ca, ca.NotAfter.Add(time.Hour), false},
	} {
		if got := tc.c.Due(tc.now); got != tc.want {
			t.Errorf("%s: Due(%s) = %v, want %v (renews at %s)", tc.name, tc.now, got, tc.want, tc.c.RenewAt())
		}
	}
}

func TestRead(t *testing.T) {
	caPEM, err := pki.NewCA("kubernetes", issued)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := caPEM.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Sign(pki.Request{CommonName: "kube-apiserver", Server: true}, issued)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ca.Sign(pki.Request{CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true}, issued.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := ca.Sign(pki.Request{CommonName: "system:node:n1", Client: true}, issued)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	kubeletPEM := filepath.Join(dir, "kubelet-client-current.pem")
	write(t, filepath.Join(dir, "k8s", "pki", "ca.crt"), caPEM.Cert)
	write(t, filepath.Join(dir, "k8s", "pki", "ca.key"), caPEM.Key)
	write(t, filepath.Join(dir, "k8s", "pki", "apiserver.crt"), leaf.Cert)
	write(t, filepath.Join(dir, "k8s", "admin.conf"), kubeconfig("client-certificate-data: "+base64.StdEncoding.EncodeToString(admin.Cert)))
	write(t, filepath.Join(dir, "k8s", "kubelet.conf"), kubeconfig("client-certificate: "+kubeletPEM))
	write(t, kubeletPEM, append(append([]byte{}, kubelet.Key...), kubelet.Cert...)) // key first, as the kubelet writes it
	write(t, filepath.Join(dir, "k8s", "manifests", "etcd.yaml"), []byte("not a certificate"))
	write(t, filepath.Join(dir, "k8s", "bootstrap-kubelet.conf"), kubeconfig("token: abcdef.0123456789abcdef"))

	got, err := Read(filepath.Join(dir, "k8s"))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	year := pki.LeafValidity
	want := []Cert{
		{Name: "admin.conf", Subject: "CN=kubernetes-admin,O=system:masters", Issuer: "CN=kubernetes",
			NotBefore: issued.Add(23 * time.Hour), NotAfter: issued.Add(24*time.Hour + year)},
		{Name: "kubelet.conf → " + kubeletPEM, Subject: "CN=system:node:n1", Issuer: "CN=kubernetes",
			NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(year)},
		{Name: "pki/apiserver.crt", Subject: "CN=kube-apiserver", Issuer: "CN=kubernetes",
			NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(year)},
		{Name: "pki/ca.crt", Subject: "CN=kubernetes", Issuer: "CN=kubernetes",
			NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(pki.CAValidity), CA: true},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if due := Due(got, issued.Add(year-time.Hour)); len(due) != 3 {
		t.Errorf("Due near the leaves' expiry = %v, want the three leaves", names(due))
	}

	// A certificate that does not parse is named, and the others are still listed.
	write(t, filepath.Join(dir, "k8s", "pki", "front-proxy-client.crt"), []byte("garbage"))
	got, err = Read(filepath.Join(dir, "k8s"))
	if err == nil || !strings.Contains(err.Error(), "pki/front-proxy-client.crt") {
		t.Errorf("Read with a broken certificate: err = %v, want one naming pki/front-proxy-client.crt", err)
	}
	if len(got) != 4 {
		t.Errorf("Read with a broken certificate listed %v, want the four good ones", names(got))
	}
}

func TestReadMissingDirectory(t *testing.T) {
	got, err := Read(filepath.Join(t.TempDir(), "nothing"))
	if err != nil || len(got) != 0 {
		t.Errorf("Read(missing dir) = %v, %v; want nothing and no error", got, err)
	}
}

func kubeconfig(cred string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]
users: [{name: u, user: {%s}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, cred))
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func names(list []Cert) []string {
	var out []string
	for _, c := range list {
		out = append(out, c.Name)
	}
	return out
}
