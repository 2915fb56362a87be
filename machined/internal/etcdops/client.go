// Package etcdops runs the etcd operations of a control-plane node for the API: list the members, stream
// a consistent snapshot; and the restore half of Init from a snapshot, which turns a snapshot file into a
// data directory for a new single-member cluster.
//
// It speaks etcd's v3 API through the JSON gateway every etcd member serves on its client URLs (POST
// /v3/cluster/member/list, ...), over HTTPS with a client certificate, rather than with etcd's Go client:
// that client brings the gRPC stubs and protobuf descriptors of etcd's whole API (and registers them
// when the process starts) into machined, PID 1, for the five calls it makes.
package etcdops

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sort"
	"time"

	"github.com/cairn-os/cairn/machined/internal/etcdmember"
)

// DefaultEndpoint is etcd's client URL on the node's loopback.
const DefaultEndpoint = "https://127.0.0.1:2379"

// DefaultCallTimeout bounds a call: etcd on this node answers at once or not at all; only the snapshot
// itself may take long.
const DefaultCallTimeout = 10 * time.Second

// Client is the machine API's etcd operations (server.EtcdOps) against the node's own etcd member, with the kubeadm-layout
// healthcheck client certificate (kube.Layout.PKIFile(kube.EtcdHealthcheckCert), ...).
type Client struct {
	// Endpoints are the members' client URLs (empty: DefaultEndpoint, the node's own member); another
	// node's cluster for a joining node's promotion.
	Endpoints []string
	CACert    string // the etcd CA's certificate file
	Cert      string // a client certificate file signed by the etcd CA
	Key       string // its key file
	// Timeout bounds each call but the snapshot's transfer (0: DefaultCallTimeout).
	Timeout time.Duration
	// Dial opens the connections (nil: net.Dialer's); tests dial from inside a node's network namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NotHereError says this node runs no etcd member (a worker, or a node not initialised yet): the API
// answers FailedPrecondition.
type NotHereError struct {
	File string
	Err  error
}

func (e *NotHereError) Error() string {
	return fmt.Sprintf("etcd does not run on this node: no etcd client certificate (%v)", e.Err)
}

func (e *NotHereError) Unwrap() error { return e.Err }

// Precondition marks the error for the API's code mapping.
func (e *NotHereError) Precondition() {}

// UnavailableError says the node's etcd does not answer: the API answers Unavailable.
type UnavailableError struct {
	Endpoint string
	Err      error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("etcd at %s does not answer: %v", e.Endpoint, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable marks the error for the API's code mapping.
func (e *UnavailableError) Unavailable() {}

// Members lists the cluster's members, by name.
func (c *Client) Members(ctx context.Context) ([]etcdmember.Member, error) {
	hc, err := c.httpClient(0)
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	var resp memberListResponse
	if err := c.call(ctx, hc, "/v3/cluster/member/list", struct{}{}, &resp); err != nil {
		return nil, c.unavailable(ctx, fmt.Errorf("member list: %w", err))
	}
	// The leader as this member knows it; a member that has lost its leader (no quorum) names none.
	var st statusResponse
	if err := c.call(ctx, hc, "/v3/maintenance/status", struct{}{}, &st); err != nil {
		st.Leader = 0
	}
	out := make([]etcdmember.Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		out = append(out, etcdmember.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
			IsLearner: m.IsLearner, IsLeader: st.Leader != 0 && m.ID == st.Leader})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Snapshot streams a consistent snapshot of the member's data into w, as etcd sends it: the database,
// then the SHA-256 of the database that etcd appends (a restore checks it). It returns the SHA-256 of
// everything written.
func (c *Client) Snapshot(ctx context.Context, w io.Writer) (string, error) {
	hc, err := c.httpClient(0)
	if err != nil {
		return "", err
	}
	defer hc.CloseIdleConnections()
	// A short call first, so an etcd that is not there is reported as such rather than as a failed
	// transfer.
	if err := c.call(ctx, hc, "/v3/maintenance/status", struct{}{}, nil); err != nil {
		return "", c.unavailable(ctx, fmt.Errorf("status: %w", err))
	}
	h := sha256.New()
	if err := c.snapshot(ctx, hc, io.MultiWriter(w, h)); err != nil {
		return "", c.unavailable(ctx, fmt.Errorf("snapshot: %w", err))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultCallTimeout
}

func (c *Client) endpoint() string { return c.endpoints()[0] }

func (c *Client) endpoints() []string {
	if len(c.Endpoints) > 0 {
		return c.Endpoints
	}
	return []string{DefaultEndpoint}
}

// unavailable wraps a failed call, unless the caller gave up (its own context error then). etcd's own
// refusals (too many learners, ...) are wrapped too: the cluster cannot do it now, and the message says
// why.
func (c *Client) unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &UnavailableError{Endpoint: c.endpoint(), Err: err}
}

func (c *Client) tlsConfig() (*tls.Config, error) {
	for _, f := range []string{c.CACert, c.Cert, c.Key} {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			return nil, &NotHereError{File: f, Err: err}
		}
	}
	ca, err := os.ReadFile(c.CACert)
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("etcd CA %s: no PEM certificate in it", c.CACert)
	}
	pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate %s: %w", c.Cert, err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
