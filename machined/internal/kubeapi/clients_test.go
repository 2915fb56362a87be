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
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "admin.conf")
	writeKubeconfig(t, kc, srv)

	call := func(get func() (*Client, error)) *Client {
		t.Helper()
		c, err := get()
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := c.Get(context.Background(), "/readyz", &v); err != nil {
			t.Fatal(err)
		}
		return c
	}
	var cs Clients
	cached := func() (*Client, error) { return cs.FromKubeconfig(kc, "") }
	first := call(cached)
	for range 4 {
		if c := call(cached); c != first {
			t.Fatalf("Clients.FromKubeconfig made a new client for an unchanged kubeconfig")
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("5 calls through Clients opened %d connections, want 1", got)
	}

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
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"health":"true"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
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
		c, err := cs.FromPEM(srv.URL, k.ca, k.cert, k.key)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := c.Get(context.Background(), "/health", &v); err != nil {
			t.Fatal(err)
		}
		return c
	}
	k := creds()
	first := get(k)
	for range 4 {
		if c := get(k); c != first {
			t.Fatalf("Clients.FromPEM made a new client for unchanged credentials")
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("5 health checks through Clients.FromPEM opened %d connections, want 1", got)
	}
	reissued := get(creds())
	if reissued == first {
		t.Errorf("Clients.FromPEM kept the client of a re-issued certificate")
	}
	if c, err := cs.FromKubeconfig(kc, ""); err != nil || c == reissued {
		t.Errorf("FromKubeconfig of the same server and credentials = %p, %v; want a client of its own, not FromPEM's %p", c, err, reissued)
	}
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
