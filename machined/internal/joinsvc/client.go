// Package joinsvc is both ends of the join service: the client a booting node uses to ask a control-plane
// node for a join ticket, and (on control-plane nodes) the service that issues them.
package joinsvc

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

// Client asks join services for tickets.
type Client struct {
	// CAHash pins the cluster's machine CA (hex SHA-256 of its DER certificate, `cairn.joinca=`). "insecure"
	// (InsecureCA) skips the check, and the ticket's own checks are all that stands between the node and a
	// wrong cluster; empty refuses to ask at all.
	CAHash string
}

// InsecureCA as CAHash accepts any join service.
const InsecureCA = "insecure"

// ErrNoCA refuses a ticket request without a pinned CA.
var ErrNoCA = errors.New("no join CA pinned (cairn.joinca=): refusing to ask an unauthenticated join service for a ticket")

// RequestTicket dials addr (HOST[:PORT], port 50001 by default) and asks for a ticket.
func (c *Client) RequestTicket(ctx context.Context, addr string, req *machine.TicketRequest) (*machine.JoinTicket, error) {
	if c.CAHash == "" {
		return nil, ErrNoCA
	}
	conn, err := dial(addr, c.tlsConfig())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return machine.NewJoinServiceClient(conn).RequestTicket(ctx, req)
}

// RenewCertificate asks the join service at addr, which must prove itself with a certificate of the
// machine CA machineCA (PEM), to renew a joined node's machine-API certificate.
func (c *Client) RenewCertificate(ctx context.Context, addr string, machineCA []byte, req *machine.RenewRequest) ([]byte, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(machineCA) {
		return nil, errors.New("no machine CA certificate to check the join service against")
	}
	conn, err := dial(addr, &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: client.ServerName})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	r, err := machine.NewJoinServiceClient(conn).RenewCertificate(ctx, req)
	if err != nil {
		return nil, err
	}
	return r.MachineCert, nil
}

func dial(addr string, cfg *tls.Config) (*grpc.ClientConn, error) {
	target, err := client.WithDefaultPort(addr, client.JoinPort)
	if err != nil {
		return nil, err
	}
	return grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
}

func (c *Client) tlsConfig() *tls.Config {
	want := strings.ToLower(strings.ReplaceAll(c.CAHash, ":", ""))
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Verified below against the pinned CA, which is not in any system pool.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if want == InsecureCA {
				return nil
			}
			return verifyPinned(raw, want)
		},
	}
}

// verifyPinned checks that the server sent its chain up to a CA whose hash is pinned, and that the leaf
// chains to it.
func verifyPinned(raw [][]byte, want string) error {
	if len(raw) < 2 {
		return errors.New("join service sent no CA certificate to check against the pinned one")
	}
	sum := sha256.Sum256(raw[len(raw)-1])
	if hex.EncodeToString(sum[:]) != want {
		return fmt.Errorf("join service's CA has hash %x, not the pinned %s", sum, want)
	}
	ca, err := x509.ParseCertificate(raw[len(raw)-1])
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: client.ServerName})
	return err
}
