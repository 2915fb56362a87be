package joinsvc

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// serveJoin starts a join service for a generated cluster, presenting a control plane's certificate
// chained to the machine CA, and returns its address and the CA's pin.
func serveJoin(t *testing.T) (*testcluster.Cluster, *Tokens, string, string) {
	c := testcluster.New(t)
	ca := c.MachineCA(t)
	leaf, err := ca.Sign(pki.Request{CommonName: "cp1", Server: true, DNSNames: []string{client.ServerName}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	cert.Certificate = append(cert.Certificate, ca.Cert.Raw)
	p := filepath.Join(t.TempDir(), TokensFile)
	tokens := NewTokens(func() string { return p }, nil)
	svc := &Service{Bus: events.NewBus(nil, nil), Issuer: &Issuer{Tokens: tokens, Now: time.Now,
		Config:  func() *config.MachineConfig { return c.ControlPlane },
		Members: func(context.Context) []*machine.Member { return []*machine.Member{{Name: "cp1", Address: "10.5.0.2"}} }}}
	addr, err := svc.Listen("127.0.0.1:0", cert)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(ca.Cert.Raw)
	return c, tokens, addr, hex.EncodeToString(sum[:])
}

func TestTicketOverTheWire(t *testing.T) {
	c, tokens, addr, pin := serveJoin(t)
	key, _ := pki.NewKey()
	pub, _ := pki.EncodePublicKey(key.Public())
	req := &machine.TicketRequest{NodeName: "w1", Addresses: []string{"10.5.0.3"}, MachinePublicKey: pub}
	ctx := context.Background()

	req.Token = "abcdef.0123456789abcdef"
	if _, err := (&Client{CAHash: pin}).RequestTicket(ctx, addr, req); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unknown token: %v, want PermissionDenied", err)
	}
	tok, _, err := tokens.Create(RoleWorker, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	req.Token = tok
	if _, err := (&Client{CAHash: "00" + pin[2:]}).RequestTicket(ctx, addr, req); err == nil {
		t.Fatal("a join service whose CA does not match the pin was trusted")
	}
	ticket, err := (&Client{CAHash: pin}).RequestTicket(ctx, addr, req)
	if err != nil {
		t.Fatalf("RequestTicket = %v", err)
	}
	if ticket.ClusterId != c.ControlPlane.Cluster.ID || ticket.Role != RoleWorker || ticket.BootstrapToken != c.Secrets.BootstrapToken {
		t.Errorf("ticket = cluster %s role %s", ticket.ClusterId, ticket.Role)
	}
	cert, err := pki.ParseCert(ticket.MachineCert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ticket.MachineCa)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: client.ServerName}); err != nil {
		t.Errorf("machine certificate does not verify: %v", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Error("machine certificate is not for the node's key")
	}
	wc, err := config.Parse(ticket.Config)
	if err != nil || config.Validate(wc) != nil || wc.Cluster.Secrets != nil || wc.Machine.Type != config.TypeWorker {
		t.Errorf("ticket config: %v / %v", err, wc)
	}
	if _, err := (&Client{CAHash: pin}).RequestTicket(ctx, addr, req); status.Code(err) != codes.PermissionDenied {
		t.Errorf("second use of a single-use token: %v, want PermissionDenied", err)
	}
}
