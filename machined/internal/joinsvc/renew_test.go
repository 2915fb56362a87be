package joinsvc

import (
	"context"
	"crypto/ecdsa"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
)

// TestRenewCertificateOverTheWire: a joined node renews its machine-API certificate with a request signed
// by its key, and gets one for the same key and name; a request signed by another key, or made too long
// ago, is refused.
func TestRenewCertificateOverTheWire(t *testing.T) {
	_, tokens, addr, pin := serveJoin(t)
	ctx := context.Background()
	key, _ := pki.NewKey()
	pub, _ := pki.EncodePublicKey(key.Public())
	tok, _, err := tokens.Create(ctx, RoleWorker, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := (&Client{CAHash: pin}).RequestTicket(ctx, addr, &machine.TicketRequest{Token: tok, NodeName: "w1",
		Addresses: []string{"10.5.0.3"}, MachinePublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	old, _ := pki.ParseCert(ticket.MachineCert)

	req, err := NewRenewRequest(ticket.MachineCert, key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&Client{}).RenewCertificate(ctx, addr, ticket.MachineCa, req)
	if err != nil {
		t.Fatalf("RenewCertificate = %v", err)
	}
	cert, err := pki.ParseCert(got)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.PublicKey.(*ecdsa.PublicKey).Equal(key.Public()) || cert.Subject.CommonName != "w1" ||
		strings.Join(cert.DNSNames, ",") != strings.Join(old.DNSNames, ",") || len(cert.IPAddresses) != len(old.IPAddresses) {
		t.Errorf("renewed certificate CN %s, names %v, addresses %v; want w1's key, name and addresses %v %v",
			cert.Subject.CommonName, cert.DNSNames, cert.IPAddresses, old.DNSNames, old.IPAddresses)
	}

	other, _ := pki.NewKey()
	forged, _ := NewRenewRequest(ticket.MachineCert, other, time.Now())
	stale, _ := NewRenewRequest(ticket.MachineCert, key, time.Now().Add(-10*time.Minute))
	for name, r := range map[string]*machine.RenewRequest{"another key": forged, "too old": stale} {
		if _, err := (&Client{}).RenewCertificate(ctx, addr, ticket.MachineCa, r); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: RenewCertificate = %v, want PermissionDenied", name, err)
		}
	}
}
