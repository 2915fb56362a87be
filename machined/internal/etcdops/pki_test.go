package etcdops

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/pki"
)

// testPKI writes a throwaway etcd CA, a server/peer certificate for 127.0.0.1 and a client certificate
// into dir, in the kubeadm layout's file names.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	now := time.Now()
	caPEM, err := pki.NewCA("etcd-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := caPEM.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Sign(pki.Request{CommonName: "n1", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Server: true, Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Sign(pki.Request{CommonName: "kube-etcd-healthcheck-client", Client: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{
		CA: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "healthcheck-client.crt"), ClientKey: filepath.Join(dir, "healthcheck-client.key"),
	}
	for path, b := range map[string][]byte{p.CA: caPEM.Cert, p.ServerCert: server.Cert, p.ServerKey: server.Key,
		p.ClientCert: client.Cert, p.ClientKey: client.Key} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}
