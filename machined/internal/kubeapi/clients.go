package kubeapi

import (
	"crypto/sha256"
	"sync"
)

// Clients keeps one Client per kubeconfig, so that machined's periodic calls (CSR approval every 10 s,
// discovery names, health) reuse one kept-alive connection instead of a TLS handshake each: on an
// emulated control plane new handshakes were 8 % of the API server's CPU, and machined was one of the
// clients that made them. A kubeconfig or certificate that changed (a rotated kubelet credential, a
// new cluster after a reset) makes a new client. The zero value is ready to use.
type Clients struct {
	mu sync.Mutex
	m  map[string]cachedClient
}

type cachedClient struct {
	sum [sha256.Size]byte
	c   *Client
}

// FromKubeconfig is FromKubeconfig, reusing the client made last time from the same credentials.
func (cs *Clients) FromKubeconfig(path, server string) (*Client, error) {
	k, err := readKubeconfig(path, server)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, b := range [][]byte{k.server, k.ca, k.cert, k.key} {
		h.Write(b)
		h.Write([]byte{0}) // keeps "ab"+"c" apart from "a"+"bc"
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	key := path + "\x00" + server

	cs.mu.Lock()
	defer cs.mu.Unlock()
	if old, ok := cs.m[key]; ok {
		if old.sum == sum {
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
	cs.m[key] = cachedClient{sum: sum, c: c}
	return c, nil
}

// closeIdle closes the client's kept-alive connections; calls still running finish.
func (c *Client) closeIdle() {
	c.http.CloseIdleConnections()
	c.slow.CloseIdleConnections()
}
