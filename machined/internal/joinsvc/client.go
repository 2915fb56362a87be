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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// Client asks join services for tickets.
type Client struct {
	// CAHash pins the cluster's machine CA (hex SHA-256 of its DER certificate, `cairn.joinca=`). "insecure"
	// (InsecureCA) skips the check, and the ticket's own checks are all that stands between the node and a
	// wrong cluster; empty refuses to ask at all.
	CAHash string
	// Attest opens this machine's TPM attestation key for one ticket request (nil, or an error wrapping
	// tpm.ErrNoTPM: the node asks without attesting, and the service's policy decides).
	Attest func() (Attester, error)
}

// Attester is a TPM attestation key (tpm.AttestationKey).
type Attester interface {
	Identity() tpm.Identity
	Respond(ch tpm.Challenge, pcrs []int) (*tpm.Evidence, error)
	Close() error
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
	js := machine.NewJoinServiceClient(conn)
	// A TPM that cannot attest does not stop the join: the request goes without, and the cluster's
	// policy decides; a refusal then carries the TPM's error too.
	att, attErr := c.attest(ctx, js)
	if att != nil {
		req = proto.Clone(req).(*machine.TicketRequest)
		req.Attestation = att
	}
	t, err := js.RequestTicket(ctx, req)
	if err != nil && attErr != nil {
		return nil, fmt.Errorf("%w (and this node could not attest: %v)", err, attErr)
	}
	return t, err
}

// attest answers the service's TPM challenge: nil when this machine has no TPM or the service checks
// no attestations (an older Cairn), an error when the TPM or the exchange fails.
func (c *Client) attest(ctx context.Context, js machine.JoinServiceClient) (*machine.Attestation, error) {
	if c.Attest == nil {
		return nil, nil
	}
	k, err := c.Attest()
	if errors.Is(err, tpm.ErrNoTPM) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attestation: %w", err)
	}
	defer k.Close()
	ch, err := js.Challenge(ctx, Keys(k))
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attestation: the join service's challenge: %w", err)
	}
	a, err := Answer(k, ch)
	if err != nil {
		return nil, fmt.Errorf("attestation: %w", err)
	}
	return a, nil
}

// Keys is what a node sends the join service to be challenged: its TPM's keys and EK certificate.
func Keys(k Attester) *machine.ChallengeRequest {
	id := k.Identity()
	return &machine.ChallengeRequest{EkPublic: id.EK, AkPublic: id.AK, EkCertificate: id.EKCert}
}

// Answer is the attestation that answers the join service's challenge ch: the recovered credential and
// a quote of the PCRs it names, made with its nonce. A node's own join sends it; an operator's join
// (cairnctl join) relays it from the node's TPMAttest RPC.
func Answer(k Attester, ch *machine.ChallengeResponse) (*machine.Attestation, error) {
	pcrs := make([]int, 0, len(ch.Pcrs))
	for _, p := range ch.Pcrs {
		pcrs = append(pcrs, int(p))
	}
	ev, err := k.Respond(tpm.Challenge{Nonce: ch.Nonce, CredentialBlob: ch.CredentialBlob, Secret: ch.EncryptedSecret}, pcrs)
	if err != nil {
		return nil, err
	}
	id := k.Identity()
	a := &machine.Attestation{ChallengeId: ch.Id, EkPublic: id.EK, AkPublic: id.AK, Credential: ev.Credential,
		Quote: ev.Attest, Signature: ev.Signature, Pcrs: map[uint32][]byte{}}
	for i, v := range ev.PCRs {
		a.Pcrs[uint32(i)] = v
	}
	return a, nil
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
