package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
)

// Options say how to reach and authenticate to one node.
type Options struct {
	// Endpoint is HOST or HOST:PORT; the port defaults to 50000.
	Endpoint string
	// Maintenance mode: the bootstrap token, and how to trust the node's self-signed certificate.
	Token              string
	Fingerprint        string // SHA-256 of the node's certificate, hex (colons allowed)
	InsecureSkipVerify bool
	// Mutual TLS mode: a cairnconfig context.
	Context *Context
	// ClockSkew is how far the node's clock runs ahead of this host's (negative: behind). In mutual TLS
	// mode its certificate is verified at the node's time: a node whose clock was moved on renews its
	// certificates at its own time, and they are not valid yet at this host's.
	ClockSkew time.Duration

	// keepalive replaces ClientKeepalive (tests: gRPC allows no ping interval below 10 s).
	keepalive *keepalive.ClientParameters
}

// Dial opens a connection to the node's machine API; nothing is sent until the first call.
func Dial(o Options) (*grpc.ClientConn, error) {
	tlsConf, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	addr, err := WithDefaultPort(o.Endpoint, MachinePort)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
	}
	ka := ClientKeepalive()
	if o.keepalive != nil {
		ka = *o.keepalive
	}
	opts = append(opts, grpc.WithKeepaliveParams(ka))
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tokenCreds(o.Token)))
	}
	return grpc.NewClient("passthrough:///"+addr, opts...)
}

// MaxMessageSize bounds one message; an etcd snapshot for Init travels in one.
const MaxMessageSize = 512 << 20

// Connect dials and wraps the connection in the Machine client.
func Connect(o Options) (machine.MachineClient, *grpc.ClientConn, error) {
	conn, err := Dial(o)
	if err != nil {
		return nil, nil, err
	}
	return machine.NewMachineClient(conn), conn, nil
}

func (o Options) tlsConfig() (*tls.Config, error) {
	if o.Context != nil && o.Token == "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(o.Context.CA)) {
			return nil, errors.New("cairnconfig: the machine CA is not a PEM certificate")
		}
		cert, err := tls.X509KeyPair([]byte(o.Context.Cert), []byte(o.Context.Key))
		if err != nil {
			return nil, fmt.Errorf("cairnconfig: client certificate: %w", err)
		}
		if err := checkClientExpiry(cert.Leaf, o.ClockSkew); err != nil {
			return nil, err
		}
		c := &tls.Config{
			MinVersion:   tls.VersionTLS13,
			RootCAs:      pool,
			ServerName:   ServerName,
			Certificates: []tls.Certificate{cert},
		}
		if o.ClockSkew != 0 {
			c.Time = func() time.Time { return time.Now().Add(o.ClockSkew) }
		}
		return c, nil
	}
	if o.Token == "" {
		return nil, errors.New("no credentials: give --token (maintenance mode) or a cairnconfig with a client certificate")
	}
	want := strings.ToLower(strings.ReplaceAll(o.Fingerprint, ":", ""))
	if want == "" && !o.InsecureSkipVerify {
		return nil, errors.New("maintenance mode: pin the node's certificate with --fingerprint (printed on its console) or say --insecure-skip-verify")
	}
	if want != "" {
		if _, err := hex.DecodeString(want); err != nil || len(want) != 64 {
			return nil, fmt.Errorf("fingerprint %q must be 64 hex digits (SHA-256)", o.Fingerprint)
		}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// The maintenance certificate is self-signed: it cannot be verified against a CA, so it is
		// verified below by its fingerprint instead, or not at all when the user said so.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if want == "" || len(raw) == 0 {
				return nil
			}
			if got := pki.Fingerprint(raw[0]); got != want {
				return fmt.Errorf("the node's certificate fingerprint is %s, not the pinned %s", got, want)
			}
			return nil
		},
	}, nil
}

// WithDefaultPort adds the port to HOST when it has none.
func WithDefaultPort(endpoint string, port int) (string, error) {
	if endpoint == "" {
		return "", errors.New("no node given: use --nodes HOST[:PORT]")
	}
	if _, _, err := net.SplitHostPort(endpoint); err == nil {
		return endpoint, nil
	}
	return net.JoinHostPort(strings.Trim(endpoint, "[]"), strconv.Itoa(port)), nil
}

// tokenCreds sends the bootstrap token as `authorization: Bearer TOKEN`, so grpcurl -H works the same.
type tokenCreds string

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return true }

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// checkClientExpiry refuses a client certificate that has expired at the node's time. The node would
// refuse it too, but its TLS alert reaches the user as "remote error: tls: expired certificate", which
// does not say whose certificate, nor what to do: a node powered on more than a year after its
// cairnconfig was written is the case.
func checkClientExpiry(leaf *x509.Certificate, skew time.Duration) error {
	if leaf == nil || !time.Now().Add(skew).After(leaf.NotAfter) {
		return nil
	}
	where := "at this host's clock"
	if skew != 0 {
		where = "at the node's clock (--clock-skew)"
	}
	return fmt.Errorf("cairnconfig: the client certificate (%s) expired on %s, %s: issue a new one with `cairnctl gen cairnconfig --secrets secrets.yaml ...`",
		leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339), where)
}
