package joinsvc

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
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
	return serveJoinEtcd(t, nil)
}

// serveJoinEtcd is serveJoin with etcd as the control plane's etcd membership.
func serveJoinEtcd(t *testing.T, etcd EtcdMembership) (*testcluster.Cluster, *Tokens, string, string) {
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
	tokens := NewTokens(FileStore(func() string { return p }), nil)
	svc := &Service{Bus: events.NewBus(nil, nil), Verifier: &Verifier{}, Issuer: &Issuer{Tokens: tokens, Now: time.Now, Etcd: etcd,
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
	tok, _, err := tokens.Create(context.Background(), RoleWorker, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	req.Token = tok
	if _, err := (&Client{CAHash: "00" + pin[2:]}).RequestTicket(ctx, addr, req); err == nil {
		t.Fatal("a join service whose CA does not match the pin was trusted")
	}
	if _, err := (&Client{}).RequestTicket(ctx, addr, req); !errors.Is(err, ErrNoCA) {
		t.Fatalf("RequestTicket without a pinned CA = %v, want ErrNoCA", err)
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

// fakeEtcd is a one-member etcd cluster that records the learners added to it.
type fakeEtcd struct {
	err      error
	learners []string
}

func (f *fakeEtcd) AddLearner(_ context.Context, name, address string) (uint64, []*machine.EtcdPeer, error) {
	if f.err != nil {
		return 0, nil, f.err
	}
	f.learners = append(f.learners, name+"@"+address)
	return 7, []*machine.EtcdPeer{
		{Name: "cp1", PeerUrl: "https://10.5.0.2:2380", ClientUrl: "https://10.5.0.2:2379"},
		{Name: name, PeerUrl: "https://" + address + ":2380"},
	}, nil
}

func TestControlPlaneTicket(t *testing.T) {
	key, _ := pki.NewKey()
	pub, _ := pki.EncodePublicKey(key.Public())
	ctx := context.Background()
	var tokens *Tokens
	var tok string
	request := func(t *testing.T, etcd EtcdMembership, addrs ...string) (*testcluster.Cluster, *machine.JoinTicket, error) {
		c, ts, addr, pin := serveJoinEtcd(t, etcd)
		tokens = ts
		var err error
		tok, _, err = tokens.Create(context.Background(), RoleControlPlane, time.Minute, 1)
		if err != nil {
			t.Fatal(err)
		}
		req := &machine.TicketRequest{Token: tok, NodeName: "cp2", Addresses: addrs, MachinePublicKey: pub}
		ticket, err := (&Client{CAHash: pin}).RequestTicket(ctx, addr, req)
		return c, ticket, err
	}

	t.Run("issued", func(t *testing.T) {
		etcd := &fakeEtcd{}
		c, ticket, err := request(t, etcd, "10.5.0.3", "10.0.2.15")
		if err != nil {
			t.Fatalf("RequestTicket = %v", err)
		}
		if diff := cmp.Diff([]string{"cp2@10.5.0.3"}, etcd.learners); diff != "" {
			t.Errorf("learners added (-want +got):\n%s", diff)
		}
		cp := ticket.ControlPlane
		if ticket.Role != RoleControlPlane || cp == nil || cp.EtcdMemberId != 7 || len(cp.EtcdMembers) != 2 {
			t.Fatalf("ticket = role %s, control plane %v; want the etcd cluster with learner 7", ticket.Role, cp)
		}
		s, err := config.ParseSecrets(cp.Secrets)
		if err != nil || s.EtcdCA.Key != c.Secrets.EtcdCA.Key {
			t.Errorf("ticket secrets: %v; want the cluster's etcd CA", err)
		}
		cfg, err := config.Parse(ticket.Config)
		if err != nil || config.Validate(cfg) != nil {
			t.Fatalf("ticket config: %v", err)
		}
		if cfg.Machine.Type != config.TypeControlPlane || cfg.Machine.Disks.Etcd == nil || cfg.Cluster.Secrets == nil {
			t.Errorf("ticket config = type %s, etcd disk %v, secrets %v; want a control plane with both",
				cfg.Machine.Type, cfg.Machine.Disks.Etcd, cfg.Cluster.Secrets != nil)
		}
	})
	t.Run("no address", func(t *testing.T) {
		etcd := &fakeEtcd{}
		if _, _, err := request(t, etcd); status.Code(err) != codes.InvalidArgument {
			t.Errorf("RequestTicket without addresses = %v, want InvalidArgument", err)
		}
		if len(etcd.learners) != 0 {
			t.Errorf("learners %v added for a refused request", etcd.learners)
		}
		if _, err := tokens.Use(context.Background(), tok); err != nil {
			t.Errorf("the token after a malformed request: %v, want its use refunded", err)
		}
	})
	t.Run("etcd refuses", func(t *testing.T) {
		_, _, err := request(t, &fakeEtcd{err: errors.New("too many learner members in cluster")}, "10.5.0.3")
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "too many learner") {
			t.Errorf("RequestTicket while etcd refuses = %v, want Unavailable with etcd's reason", err)
		}
		// The single-use token was given back: the node's retry can still use it, once.
		if _, err := tokens.Use(context.Background(), tok); err != nil {
			t.Errorf("the token after a refusal by etcd: %v, want its use refunded", err)
		}
		if _, err := tokens.Use(context.Background(), tok); err == nil {
			t.Error("a refunded single-use token admitted twice")
		}
	})
	t.Run("no etcd on this node", func(t *testing.T) {
		if _, _, err := request(t, nil, "10.5.0.3"); status.Code(err) != codes.Unimplemented {
			t.Errorf("RequestTicket from a node without etcd membership = %v, want Unimplemented", err)
		}
	})
}

// A node that joins again under a name it left clears its left mark before it gets its ticket; when the
// mark cannot be cleared, no ticket is issued and the token stays usable for the retry.
func TestTicketClearsLeftMark(t *testing.T) {
	c := testcluster.New(t)
	p := filepath.Join(t.TempDir(), TokensFile)
	tokens := NewTokens(FileStore(func() string { return p }), nil)
	var cleared []string
	clearErr := errors.New("the API server is busy")
	iss := &Issuer{Tokens: tokens, Now: time.Now, Config: func() *config.MachineConfig { return c.ControlPlane },
		Members: func(context.Context) []*machine.Member { return nil },
		Rejoin: func(_ context.Context, name string) error {
			cleared = append(cleared, name)
			return clearErr
		}}
	ctx := context.Background()
	tok, _, err := tokens.Create(ctx, RoleWorker, time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := pki.NewKey()
	pub, _ := pki.EncodePublicKey(key.Public())
	req := &machine.TicketRequest{NodeName: "w1", Token: tok, MachinePublicKey: pub}
	if _, err := iss.Issue(ctx, req); !errors.Is(err, clearErr) {
		t.Fatalf("Issue with the left mark not cleared = %v, want %v", err, clearErr)
	}
	// The join service says Unavailable, which the joining side retries: the API was busy, not wrong.
	svc := &Service{Bus: events.NewBus(nil, nil), Issuer: iss}
	if _, err := svc.RequestTicket(ctx, req); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), clearErr.Error()) {
		t.Fatalf("RequestTicket with the left mark not cleared = %v, want Unavailable with the API's error", err)
	} else if d := status.Convert(err).Details(); len(d) != 1 || d[0].(*errdetails.RetryInfo).GetRetryDelay().AsDuration() != RetryAfter {
		t.Errorf("RequestTicket's Unavailable carries %v, want a RetryInfo of %v (the joining side retries only that)", d, RetryAfter)
	}
	clearErr = nil
	if _, err := iss.Issue(ctx, req); err != nil {
		t.Fatalf("Issue after the mark was cleared = %v (the first try spent the token?)", err)
	}
	if diff := cmp.Diff([]string{"w1", "w1", "w1"}, cleared); diff != "" {
		t.Errorf("Rejoin calls (-want +got):\n%s", diff)
	}
}
