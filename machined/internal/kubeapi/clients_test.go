package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// TestClientsReuseTheConnection: periodic calls through Clients cost one TLS connection, not one each,
// and a changed credential gets a new client.
func TestClientsReuseTheConnection(t *testing.T) {
	srv, conns := countingServer(t, `{}`)
	kc := filepath.Join(t.TempDir(), "admin.conf")
	writeKubeconfig(t, kc, srv)

	call := func(get func() (*Client, error)) *Client { t.Helper(); return mustGet(t, "/readyz", get) }
	var cs Clients
	cached := func() (*Client, error) { return cs.FromKubeconfig(kc, "") }
	first := oneClientFiveCalls(t, "Clients.FromKubeconfig", conns, func() *Client { return call(cached) })

	conns.Store(0)
	for range 2 {
		call(func() (*Client, error) { return FromKubeconfig(kc, "") })
	}
	if got := conns.Load(); got != 2 {
		t.Errorf("2 calls through new clients opened %d connections, want 2 (the cost Clients saves)", got)
	}

	writeKubeconfig(t, kc, srv) // a new client certificate
	if c := call(cached); c == first {
		t.Errorf("Clients.FromKubeconfig kept the client of a replaced credential")
	}
}

// TestClientsRotatedCertificate: a kubeconfig naming a certificate file (the kubelet's) keeps its client
// while neither changes, and gets a new one when only the file is rotated.
func TestClientsRotatedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{}`)) }))
	defer srv.Close()
	dir := t.TempDir()
	embedded, kc, pemFile := filepath.Join(dir, "embedded.conf"), filepath.Join(dir, "kubelet.conf"), filepath.Join(dir, "kubelet-client-current.pem")
	rotate := func() {
		t.Helper()
		writeKubeconfig(t, embedded, srv)
		k, err := readKubeconfig(embedded, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pemFile, append(k.cert, k.key...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rotate()
	cfg := clientcmdv1.Config{
		Clusters: []clientcmdv1.NamedCluster{{Name: "c", Cluster: clientcmdv1.Cluster{Server: srv.URL,
			CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: "kubelet", AuthInfo: clientcmdv1.AuthInfo{ClientCertificate: pemFile, ClientKey: pemFile}}},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var cs Clients
	first, err := cs.FromKubeconfig(kc, "")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := cs.FromKubeconfig(kc, ""); err != nil || again != first {
		t.Fatalf("FromKubeconfig of an unchanged kubeconfig and certificate = %p, %v; want the first client %p", again, err, first)
	}
	rotate()
	rotated, err := cs.FromKubeconfig(kc, "")
	if err != nil {
		t.Fatal(err)
	}
	if rotated == first {
		t.Errorf("FromKubeconfig kept the client after the certificate file was rotated")
	}
	if err := os.Remove(pemFile); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.FromKubeconfig(kc, ""); err == nil {
		t.Errorf("FromKubeconfig with its certificate file gone = nil error, want the read error")
	}
}

// TestClientsFromPEM: etcd's health check, asked every few seconds, keeps one connection while its
// certificate files are unchanged, gets a new client when one is re-issued, and is kept apart from a
// kubeconfig's client of the same server.
func TestClientsFromPEM(t *testing.T) {
	srv, conns := countingServer(t, `{"health":"true"}`)
	kc := filepath.Join(t.TempDir(), "etcd.conf")
	creds := func() credentials {
		t.Helper()
		writeKubeconfig(t, kc, srv) // a new client certificate each time
		k, err := readKubeconfig(kc, "")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	var cs Clients
	get := func(k credentials) *Client {
		t.Helper()
		return mustGet(t, "/health", func() (*Client, error) { return cs.FromPEM(srv.URL, k.ca, k.cert, k.key) })
	}
	k := creds()
	first := oneClientFiveCalls(t, "Clients.FromPEM", conns, func() *Client { return get(k) })
	reissued := get(creds())
	if reissued == first {
		t.Errorf("Clients.FromPEM kept the client of a re-issued certificate")
	}
	if c, err := cs.FromKubeconfig(kc, ""); err != nil || c == reissued {
		t.Errorf("FromKubeconfig of the same server and credentials = %p, %v; want a client of its own, not FromPEM's %p", c, err, reissued)
	}
}

// oneClientFiveCalls makes five calls through call, which gets its client from a Clients, and checks
// that they share one client and one connection of the server counting conns (countingServer).
func oneClientFiveCalls(t *testing.T, what string, conns *atomic.Int32, call func() *Client) *Client {
	t.Helper()
	first := call()
	for range 4 {
		if c := call(); c != first {
			t.Fatalf("%s made a new client for unchanged credentials", what)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("5 calls through %s opened %d connections, want 1", what, got)
	}
	return first
}

// mustGet gets a client from get and asks path through it, failing the test on any error.
func mustGet(t *testing.T, path string, get func() (*Client, error)) *Client {
	t.Helper()
	c, err := get()
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := c.Get(context.Background(), path, &v); err != nil {
		t.Fatal(err)
	}
	return c
}

// countingServer is a TLS server that answers body to every request and counts the connections made to
// it; it is closed when the test ends.
func countingServer(t *testing.T, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	conns := new(atomic.Int32)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(body))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, conns
}

// writeKubeconfig writes a kubeconfig for srv with a new self-signed client certificate.
func writeKubeconfig(t *testing.T, path string, srv *httptest.Server) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdv1.Config{
		Clusters: []clientcmdv1.NamedCluster{{Name: "c", Cluster: clientcmdv1.Cluster{Server: srv.URL,
			CertificateAuthorityData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: "admin", AuthInfo: clientcmdv1.AuthInfo{
			ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}}},
	}
	data, err := yaml.Marshal(kc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
