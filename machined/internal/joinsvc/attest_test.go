//go:build cgo

// The TPM simulator is C: these run where cgo does (make unit, -race).

package joinsvc

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport/simulator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
	"github.com/cairn-os/cairn/machined/internal/tpm"
)

// TestAttestedJoin runs issue 18's attested join over the wire against the TPM simulator: a node that
// attests gets its ticket; the cluster's policy refuses a node without a TPM when it requires one, a
// PCR value it does not allow, a replayed answer and a forged quote, each with its reason, and spends
// no token on them.
func TestAttestedJoin(t *testing.T) {
	sim, err := simulator.OpenSimulator()
	if err != nil {
		t.Fatal(err)
	}
	tp := tpm.New(sim)
	t.Cleanup(func() { tp.Close() })
	if err := tp.Extend(tpm.PCR, sha256.Sum256([]byte("boot"))); err != nil {
		t.Fatal(err)
	}
	pcr, err := tp.Read(tpm.PCR)
	if err != nil {
		t.Fatal(err)
	}
	c, tokens, addr, pin := serveJoin(t)
	policy := &c.ControlPlane.Cluster.JoinAttestation
	key, _ := pki.NewKey()
	pub, _ := pki.EncodePublicKey(key.Public())
	ctx := context.Background()
	request := func() *machine.TicketRequest {
		tok, _, err := tokens.Create(ctx, RoleWorker, time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		return &machine.TicketRequest{Token: tok, NodeName: "w1", Addresses: []string{"10.5.0.3"}, MachinePublicKey: pub}
	}
	withTPM := &Client{CAHash: pin, Attest: func() (Attester, error) {
		return tp.AttestationKey() // its Close flushes the keys and leaves the TPM to the test
	}}
	withoutTPM := &Client{CAHash: pin, Attest: func() (Attester, error) { return nil, tpm.ErrNoTPM }}

	if _, err := withTPM.RequestTicket(ctx, addr, request()); err != nil {
		t.Fatalf("a node that attests, no PCR required: %v", err)
	}
	if _, err := withoutTPM.RequestTicket(ctx, addr, request()); err != nil {
		t.Fatalf("a node without a TPM where the policy does not require one: %v", err)
	}
	if _, err := (&Client{CAHash: pin, Attest: func() (Attester, error) { return nil, errors.New("TPM_RC_HIERARCHY") }}).RequestTicket(ctx, addr, request()); err != nil {
		t.Fatalf("a node whose TPM cannot attest, where the policy does not require it: %v", err)
	}

	*policy = config.JoinAttestation{Required: true, PCRs: map[int]string{tpm.PCR: hex.EncodeToString(pcr[0])}}
	if _, err := withTPM.RequestTicket(ctx, addr, request()); err != nil {
		t.Fatalf("a node whose PCR %d is what the policy wants: %v", tpm.PCR, err)
	}
	refused := func(name string, err error, reason string) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), reason) {
			t.Errorf("%s: %v; want PermissionDenied saying %q", name, err, reason)
		}
	}
	req := request()
	_, err = withoutTPM.RequestTicket(ctx, addr, req)
	refused("no TPM, policy requires one", err, "only nodes that attest with a TPM")
	if role, err := tokens.Use(ctx, req.Token); err != nil || role != RoleWorker {
		t.Errorf("the refused node's token was spent: %v", err)
	}

	broken := &Client{CAHash: pin, Attest: func() (Attester, error) { return nil, errors.New("TPM_RC_HIERARCHY") }}
	_, err = broken.RequestTicket(ctx, addr, request())
	refused("a TPM that cannot attest, policy requires it", err, "could not attest: attestation: TPM_RC_HIERARCHY")

	policy.PCRs = map[int]string{tpm.PCR: strings.Repeat("00", 32)}
	_, err = withTPM.RequestTicket(ctx, addr, request())
	refused("a PCR value the policy does not allow", err, "PCR 15")
	policy.PCRs = nil

	// An answer made by hand, so it can be sent twice and tampered with.
	answer := func() *machine.Attestation {
		conn, err := dial(addr, withTPM.tlsConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		a, err := withTPM.attest(ctx, machine.NewJoinServiceClient(conn))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	send := func(a *machine.Attestation) error {
		conn, err := dial(addr, withTPM.tlsConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		r := request()
		r.Attestation = a
		_, err = machine.NewJoinServiceClient(conn).RequestTicket(ctx, r)
		return err
	}
	a := answer()
	if err := send(a); err != nil {
		t.Fatalf("a hand-made honest answer: %v", err)
	}
	refused("the same answer again", send(a), "no open challenge")
	forged := answer()
	forged.Signature = append([]byte(nil), forged.Signature...)
	forged.Signature[len(forged.Signature)-1] ^= 1
	refused("a forged quote", send(forged), "signature")
	stolen := answer()
	stolen.Pcrs[tpm.PCR] = make([]byte, 32)
	refused("PCR values other than the quoted ones", send(stolen), "not the ones quoted")
}

// withCert is a TPM whose maker wrote cert (DER) for its EK.
type withCert struct {
	*tpm.AttestationKey
	cert []byte
}

func (w withCert) Identity() tpm.Identity {
	id := w.AttestationKey.Identity()
	id.EKCert = w.cert
	return id
}

// A cluster that names the TPM makers it trusts (cluster.joinAttestation.ekRoots) admits a node whose
// TPM's EK certificate is from one of them, and refuses one from another maker, one for another key and
// a TPM without a certificate, each saying why, with no token spent.
func TestAttestedJoinEKCertificate(t *testing.T) {
	sim, err := simulator.OpenSimulator()
	if err != nil {
		t.Fatal(err)
	}
	tp := tpm.New(sim)
	t.Cleanup(func() { tp.Close() })
	c, tokens, addr, pin := serveJoin(t)
	ctx := context.Background()
	key, _ := pki.NewKey()
	pub, _ := pki.EncodePublicKey(key.Public())
	request := func() *machine.TicketRequest {
		tok, _, err := tokens.Create(ctx, RoleWorker, time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		return &machine.TicketRequest{Token: tok, NodeName: "w1", Addresses: []string{"10.5.0.3"}, MachinePublicKey: pub}
	}
	maker, err := pki.NewCA("TPM maker", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("another TPM maker", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// certFor signs a certificate for the TPM's EK (or, with forKey, another key) by ca.
	certFor := func(ca pki.PEM, forKey crypto.PublicKey) []byte {
		kp, err := ca.ParseCA()
		if err != nil {
			t.Fatal(err)
		}
		if forKey == nil {
			k, err := tp.AttestationKey()
			if err != nil {
				t.Fatal(err)
			}
			ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](k.Identity().EK)
			if err == nil {
				forKey, err = tpm2.Pub(*ek)
			}
			k.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		der, err := kp.SignPublic(pki.Request{CommonName: "tpm", Client: true}, forKey, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	node := func(cert []byte) *Client {
		return &Client{CAHash: pin, Attest: func() (Attester, error) {
			k, err := tp.AttestationKey()
			return withCert{k, cert}, err
		}}
	}
	c.ControlPlane.Cluster.JoinAttestation = config.JoinAttestation{Required: true, EKRoots: []string{string(maker.Cert)}}
	if _, err := node(certFor(maker, nil)).RequestTicket(ctx, addr, request()); err != nil {
		t.Fatalf("a TPM of a trusted maker: %v", err)
	}
	someKey, _ := pki.NewKey()
	for name, tc := range map[string]struct {
		cert   []byte
		reason string
	}{
		"another maker's TPM":          {certFor(other, nil), "not from a trusted TPM maker"},
		"a certificate of another key": {certFor(maker, someKey.Public()), "for another key"},
		"a TPM without a certificate":  {nil, "holds no EK certificate"},
	} {
		req := request()
		_, err := node(tc.cert).RequestTicket(ctx, addr, req)
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v; want PermissionDenied saying %q", name, err, tc.reason)
		}
		if _, err := tokens.Use(ctx, req.Token); err != nil {
			t.Errorf("%s: the refused node's token was spent: %v", name, err)
		}
	}
}
