package kubeapi

import (
	"crypto/sha256"
	"os"
	"sync"
)

// Clients keeps one Client per kubeconfig, so that machined's periodic calls (CSR approval every 10 s,
// discovery names, health) reuse one kept-alive connection instead of a TLS handshake each: on an
// emulated control plane new handshakes were 8 % of the API server's CPU, and machined was one of the
// clients that made them. A kubeconfig or certificate that changed (a rotated kubelet credential, a
// new cluster after a reset) makes a new client. The zero value is ready to use.
//
// The kubeconfig is parsed again only when its bytes (or the certificate file it names) changed: YAML
// through JSON into client-go's types was 15 % of an idle control plane's machined CPU when every call
// parsed it.
type Clients struct {
	mu sync.Mutex
	m  map[string]cachedClient
}

type cachedClient struct {
	file     [sha256.Size]byte // the kubeconfig's bytes (FromKubeconfig)
	certFile string            // the client certificate file it names, if any
	cert     [sha256.Size]byte // that file's bytes
	sum      [sha256.Size]byte // the credentials
	c        *Client
}

// FromKubeconfig is FromKubeconfig, reusing the client made last time from the same credentials.
func (cs *Clients) FromKubeconfig(path, server string) (*Client, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	file := sha256.Sum256(data)
	key := path + "\x00" + server
	cs.mu.Lock()
	old, ok := cs.m[key]
	cs.mu.Unlock()
	if ok && old.file == file && (old.certFile == "" || fileSum(old.certFile) == old.cert) {
		return old.c, nil
	}

	k, certFile, err := parseKubeconfig(path, data, server)
	if err != nil {
		return nil, err
	}
	var cert [sha256.Size]byte
	if certFile != "" {
		cert = sha256.Sum256(k.cert) // the file's bytes, as parseKubeconfig read them
	}
	return cs.forCredentials(key, k, cachedClient{file: file, certFile: certFile, cert: cert})
}

// FromPEM is New, reusing the client made last time for server from the same PEM credentials: etcd's
// health checks, which machined asks every few seconds (Init's wait, cairnctl health), and whose every
// new client was one more TLS handshake with etcd and one more kept-alive connection left open until it
// timed out.
func (cs *Clients) FromPEM(server string, caPEM, certPEM, keyPEM []byte) (*Client, error) {
	return cs.forCredentials("pem\x00"+server, credentials{server: []byte(server), ca: caPEM, cert: certPEM, key: keyPEM}, cachedClient{})
}

// forCredentials returns the client kept under key when it was made from the same credentials, and
// otherwise makes one, keeps it with entry's record of where the credentials came from and closes the
// old one's idle connections.
func (cs *Clients) forCredentials(key string, k credentials, entry cachedClient) (*Client, error) {
	h := sha256.New()
	for _, b := range [][]byte{k.server, k.ca, k.cert, k.key} {
		h.Write(b)
		h.Write([]byte{0}) // keeps "ab"+"c" apart from "a"+"bc"
	}
	h.Sum(entry.sum[:0])

	cs.mu.Lock()
	defer cs.mu.Unlock()
	if old, ok := cs.m[key]; ok {
		if old.sum == entry.sum {
			entry.c = old.c
			cs.m[key] = entry
			return old.c, nil
		}
		old.c.closeIdle()
	}
	c, err := New(string(k.server), k.ca, k.cert, k.key)
	if err != nil {
		return nil, err
	}
	if cs.m == nil {
		cs.m = map[string]cachedClient{}
	}
	entry.c = c
	cs.m[key] = entry
	return c, nil
}

// fileSum is the SHA-256 of a file's bytes; a file that cannot be read sums as all zeros, which differs from
// any certificate's sum, so the kubeconfig is read again and its error reported.
func fileSum(name string) [sha256.Size]byte {
	b, err := os.ReadFile(name)
	if err != nil {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(b)
}

// closeIdle closes the client's kept-alive connections; calls still running finish.
func (c *Client) closeIdle() {
	c.http.CloseIdleConnections()
	c.slow.CloseIdleConnections()
}
