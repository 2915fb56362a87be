package client

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/pki"
)

// A node that goes silent mid-stream (it reset; the path still holds the connection open) ends the
// client's stream with Unavailable once a ping goes unanswered, long before the call's deadline.
func TestKeepaliveEndsSilentStream(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("node", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})),
		grpc.KeepaliveEnforcementPolicy(ServerKeepalivePolicy()))
	healthpb.RegisterHealthServer(g, health.NewServer())
	go g.Serve(l)
	defer g.Stop()
	p := newFreezingProxy(t, l.Addr().String())

	// gRPC raises any ping interval below 10 s to 10 s; the timeout can be short.
	ka := keepalive.ClientParameters{Time: 10 * time.Second, Timeout: time.Second}
	conn, err := Dial(Options{Endpoint: p.addr, Token: "t", InsecureSkipVerify: true, keepalive: &ka})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Long enough that only a ping can end the call first.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first Watch answer: %v", err)
	}
	p.freeze()
	start := time.Now()
	_, err = s.Recv()
	if got := status.Code(err); got != codes.Unavailable {
		t.Fatalf("Recv after the node went silent = %v (after %v), want Unavailable", err, time.Since(start).Round(time.Second))
	}
}

// The node's policy must allow the client's pings: a stricter one answers them with GOAWAY, ending the
// stream the pings were meant to keep.
func TestKeepalivePolicyAllowsClient(t *testing.T) {
	if got, limit := ClientKeepalive().Time, ServerKeepalivePolicy().MinTime; got < limit {
		t.Errorf("ClientKeepalive().Time = %v, below the server's ServerKeepalivePolicy().MinTime %v", got, limit)
	}
	if ServerKeepalive().Timeout <= 0 || ClientKeepalive().Timeout <= 0 {
		t.Errorf("keepalive timeouts must be set: client %v, server %v", ClientKeepalive().Timeout, ServerKeepalive().Timeout)
	}
}

// freezingProxy forwards TCP to a backend until freeze, then holds every connection open and moves no
// more bytes: a peer gone silent behind a path that does not close.
type freezingProxy struct {
	addr   string
	mu     sync.Mutex
	frozen chan struct{}
}

func newFreezingProxy(t *testing.T, backend string) *freezingProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{addr: l.Addr().String(), frozen: make(chan struct{})}
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			conns = append(conns, c, b)
			p.mu.Unlock()
			go p.pipe(b, c)
			go p.pipe(c, b)
		}
	}()
	return p
}

func (p *freezingProxy) freeze() { close(p.frozen) }

// pipe copies src to dst until freeze; after it, what arrives is read and dropped.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-p.frozen:
			io.Discard.Write(buf[:n])
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}
