package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
)

// fakeControlPlane is a control-plane node's machine API (CreateJoinToken) and join service.
type fakeControlPlane struct {
	machine.UnimplementedMachineServer
	machine.UnimplementedJoinServiceServer
	mu         sync.Mutex
	tokenReqs  []*machine.CreateJoinTokenRequest
	ticketReqs []*machine.TicketRequest
	clientOrgs []string
	ticket     *machine.JoinTicket // returned by RequestTicket; its Role follows the token's if empty
	ticketErr  error
	issued     string
}

func (f *fakeControlPlane) CreateJoinToken(ctx context.Context, r *machine.CreateJoinTokenRequest) (*machine.CreateJoinTokenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokenReqs = append(f.tokenReqs, r)
	f.clientOrgs = append(f.clientOrgs, peerOrg(ctx))
	f.issued = "abcdef.0123456789abcdef"
	return &machine.CreateJoinTokenResponse{Token: f.issued}, nil
}

func (f *fakeControlPlane) RequestTicket(_ context.Context, r *machine.TicketRequest) (*machine.JoinTicket, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ticketReqs = append(f.ticketReqs, r)
	if f.ticketErr != nil {
		return nil, f.ticketErr
	}
	if r.Token != f.issued {
		return nil, status.Error(codes.PermissionDenied, "unknown join token")
	}
	t := proto.Clone(f.ticket).(*machine.JoinTicket)
	if t.Role == "" {
		t.Role = f.tokenReqs[len(f.tokenReqs)-1].Role
	}
	return t, nil
}

// peerOrg is the Organization of the client certificate of the call: the caller's role.
func peerOrg(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 || len(info.State.PeerCertificates[0].Subject.Organization) == 0 {
		return ""
	}
	return info.State.PeerCertificates[0].Subject.Organization[0]
}

// fakeNode is a joining node's maintenance API.
type fakeNode struct {
	machine.UnimplementedMachineServer
	token   string
	status  *machine.StatusResponse
	joinErr error
	mu      sync.Mutex
	joins   []*machine.JoinRequest
}

func (f *fakeNode) Status(context.Context, *machine.StatusRequest) (*machine.StatusResponse, error) {
	return f.status, nil
}

func (f *fakeNode) Join(r *machine.JoinRequest, s grpc.ServerStreamingServer[machine.Event]) error {
	f.mu.Lock()
	f.joins = append(f.joins, r)
	f.mu.Unlock()
	if f.joinErr != nil {
		return f.joinErr
	}
	for _, task := range []string{"lock", "mount-state", "kubelet"} {
		if err := s.Send(&machine.Event{Sequence: "join", Task: task, Outcome: "done"}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeNode) auth(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+f.token {
		return status.Error(codes.Unauthenticated, "bad token")
	}
	return nil
}

// serve starts a gRPC server with TLS on 127.0.0.1:0 and returns its address.
func serve(t *testing.T, tc *tls.Config, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(append(opts, grpc.Creds(credentials.NewTLS(tc)))...)
	register(s)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func leaf(t *testing.T, ca pki.PEM, req pki.Request) tls.Certificate {
	t.Helper()
	kp, err := ca.ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	p, err := kp.Sign(req, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type joinEnv struct {
	cp      *fakeControlPlane
	node    *fakeNode
	target  JoinTarget
	configs *Configs
	// otherCA gives the join service a certificate from a CA that is not the cluster's.
	otherCA bool
	// wrongFingerprint pins a fingerprint the joining node's certificate does not have.
	wrongFingerprint bool
	// nodeServer and joinService, when set, serve in place of node and cp.
	nodeServer  machine.MachineServer
	joinService machine.JoinServiceServer
}

// newJoinEnv starts a control plane (machine API with mutual TLS, join service with TLS, both with a
// certificate from the cluster's machine CA) and a joining node in maintenance mode (self-signed
// certificate pinned by fingerprint, bootstrap token).
func newJoinEnv(t *testing.T, edit func(*joinEnv)) *joinEnv {
	t.Helper()
	l, err := Plan("demo", 1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := GenerateConfigs("demo", l, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	machineCA := pki.PEM{Cert: []byte(cfgs.Secrets.MachineCA.Cert), Key: []byte(cfgs.Secrets.MachineCA.Key)}
	e := &joinEnv{
		configs: cfgs,
		cp: &fakeControlPlane{ticket: &machine.JoinTicket{
			ClusterName: "demo", ClusterId: cfgs.ControlPlane.Cluster.ID, ApiEndpoints: []string{"https://10.5.0.2:6443"},
			MachineCa: machineCA.Cert, MachineCert: []byte("signed for the node's key"),
		}},
		node: &fakeNode{token: "t0k", status: &machine.StatusResponse{
			State: "Boot", Hostname: "cairn-1234", Addresses: []string{"10.0.2.15", "10.5.0.3"},
			MachinePublicKey: []byte("-----BEGIN PUBLIC KEY-----\nnode\n-----END PUBLIC KEY-----\n"),
		}},
	}
	serverCert := leaf(t, machineCA, pki.Request{CommonName: "demo-cp1", DNSNames: []string{client.ServerName}, Server: true})
	joinCert := serverCert
	if edit != nil {
		edit(e)
		if e.otherCA {
			other, err := pki.NewCA("someone-else", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			joinCert = leaf(t, other, pki.Request{CommonName: "impostor", DNSNames: []string{client.ServerName}, Server: true})
		}
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(machineCA.Cert)
	cpAddr := serve(t, &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert},
		func(s *grpc.Server) { machine.RegisterMachineServer(s, e.cp) })
	joinAddr := serve(t, &tls.Config{Certificates: []tls.Certificate{joinCert}},
		func(s *grpc.Server) {
			var js machine.JoinServiceServer = e.cp
			if e.joinService != nil {
				js = e.joinService
			}
			machine.RegisterJoinServiceServer(s, js)
		})

	maintCA, err := pki.NewCA("maintenance", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nodeCert := leaf(t, maintCA, pki.Request{CommonName: "maintenance", Server: true})
	nodeAddr := serve(t, &tls.Config{Certificates: []tls.Certificate{nodeCert}},
		func(s *grpc.Server) {
			var n machine.MachineServer = e.node
			if e.nodeServer != nil {
				n = e.nodeServer
			}
			machine.RegisterMachineServer(s, n)
		},
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := e.node.auth(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := e.node.auth(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}))

	cctx, err := ClientContext(cfgs.Secrets, []string{cpAddr}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fp := pki.Fingerprint(nodeCert.Certificate[0])
	if e.wrongFingerprint {
		fp = strings.Repeat("0", 64)
	}
	e.target = JoinTarget{
		Node:         client.Options{Endpoint: nodeAddr, Token: "t0k", Fingerprint: fp},
		ControlPlane: cpAddr, JoinService: joinAddr, Context: cctx,
	}
	return e
}

func TestJoinNode(t *testing.T) {
	worker := func(e *joinEnv) []byte { return mustMarshal(t, e.configs.Nodes["demo-w1"]) }
	controlPlane := func(e *joinEnv) []byte { return mustMarshal(t, e.configs.Nodes["demo-cp1"]) }
	tests := []struct {
		name    string
		edit    func(*joinEnv)
		config  func(*joinEnv) []byte
		wantErr string // "" for success
		// What must have happened: a token asked for, a ticket asked for, the node's Join called.
		wantToken, wantTicket, wantJoin bool
	}{
		{name: "worker", config: worker, wantToken: true, wantTicket: true, wantJoin: true},
		{name: "control plane", config: controlPlane, wantToken: true, wantTicket: true, wantJoin: true},
		{name: "node already configured", config: worker,
			edit:    func(e *joinEnv) { e.node.status.State, e.node.status.LockedBy = "Running", "init" },
			wantErr: "only an unconfigured node in Boot can join"},
		{name: "node without a public key", config: worker,
			edit:    func(e *joinEnv) { e.node.status.MachinePublicKey = nil },
			wantErr: "no machine public key"},
		{name: "token refused by the join service", config: worker,
			edit:    func(e *joinEnv) { e.cp.ticketErr = status.Error(codes.PermissionDenied, "token expired") },
			wantErr: "PermissionDenied", wantToken: true, wantTicket: true},
		{name: "control plane of another cluster", config: worker,
			edit:    func(e *joinEnv) { e.cp.ticket.ClusterId = "00000000000000ff" },
			wantErr: "belongs to cluster demo (00000000000000ff)", wantToken: true, wantTicket: true},
		{name: "ticket for the wrong role", config: worker,
			edit:    func(e *joinEnv) { e.cp.ticket.Role = "controlplane" },
			wantErr: "issued a controlplane ticket, but the config is for a worker", wantToken: true, wantTicket: true},
		{name: "join service with a certificate from another CA", config: worker,
			edit:    func(e *joinEnv) { e.otherCA = true },
			wantErr: "certificate", wantToken: true},
		{name: "wrong fingerprint for the new node", config: worker,
			edit:    func(e *joinEnv) { e.wrongFingerprint = true },
			wantErr: "fingerprint"},
		{name: "node refuses the join", config: worker,
			edit:    func(e *joinEnv) { e.node.joinErr = status.Error(codes.Aborted, "node lock held by init") },
			wantErr: "Aborted", wantToken: true, wantTicket: true, wantJoin: true},
		{name: "not a machine config", config: func(*joinEnv) []byte { return []byte("kind: Pod\n") },
			wantErr: "join config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newJoinEnv(t, tt.edit)
			cfg := tt.config(e)
			var events []string
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := JoinNode(ctx, e.target, cfg, false, func(ev *machine.Event) { events = append(events, ev.Task) })
			if tt.wantErr == "" && err != nil {
				t.Fatalf("JoinNode() = %v, want success", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("JoinNode() = %v, want an error with %q", err, tt.wantErr)
			}
			if got := len(e.cp.tokenReqs) > 0; got != tt.wantToken {
				t.Errorf("join token asked for = %v, want %v", got, tt.wantToken)
			}
			if got := len(e.cp.ticketReqs) > 0; got != tt.wantTicket {
				t.Errorf("ticket asked for = %v, want %v", got, tt.wantTicket)
			}
			if got := len(e.node.joins) > 0; got != tt.wantJoin {
				t.Errorf("node's Join called = %v, want %v", got, tt.wantJoin)
			}
			if tt.wantErr != "" {
				return
			}
			parsed, _ := config.Parse(cfg)
			checkJoinFlow(t, e, parsed, cfg, events)
		})
	}
}

// checkJoinFlow checks what each party of a successful join was given.
func checkJoinFlow(t *testing.T, e *joinEnv, cfg *config.MachineConfig, cfgYAML []byte, events []string) {
	t.Helper()
	tr := e.cp.tokenReqs[0]
	if tr.Role != cfg.Machine.Type || tr.TtlSeconds != 600 || tr.Uses != 1 {
		t.Errorf("CreateJoinToken(%v), want role %s, ttl 600 s, 1 use", tr, cfg.Machine.Type)
	}
	if e.cp.clientOrgs[0] != client.RoleAdmin {
		t.Errorf("CreateJoinToken came with a %q certificate, want %s", e.cp.clientOrgs[0], client.RoleAdmin)
	}
	ticketReq := e.cp.ticketReqs[0]
	if ticketReq.Token != e.cp.issued || string(ticketReq.MachinePublicKey) != string(e.node.status.MachinePublicKey) {
		t.Errorf("RequestTicket(token %q, key %q), want the issued token and the node's public key", ticketReq.Token, ticketReq.MachinePublicKey)
	}
	if ticketReq.NodeName != cfg.Machine.Hostname {
		t.Errorf("RequestTicket node name = %q, want the config's hostname %q", ticketReq.NodeName, cfg.Machine.Hostname)
	}
	wantAddrs := []string{cfg.Machine.Kubelet.NodeIP, "10.0.2.15"}
	if cfg.Machine.Kubelet.NodeIP != "10.5.0.3" {
		wantAddrs = append(wantAddrs, "10.5.0.3")
	}
	if strings.Join(ticketReq.Addresses, ",") != strings.Join(wantAddrs, ",") {
		t.Errorf("RequestTicket addresses = %v, want %v (node IP first, no repeats)", ticketReq.Addresses, wantAddrs)
	}
	j := e.node.joins[0]
	if string(j.Config) != string(cfgYAML) {
		t.Errorf("Join config differs from the one given")
	}
	var got machine.JoinTicket
	if err := proto.Unmarshal(j.Ticket, &got); err != nil {
		t.Fatalf("Join ticket does not unmarshal: %v", err)
	}
	if got.ClusterId != cfg.Cluster.ID || got.Role != cfg.Machine.Type || string(got.MachineCert) != "signed for the node's key" {
		t.Errorf("Join ticket = %v, want the join service's ticket", &got)
	}
	if strings.Join(events, ",") != "lock,mount-state,kubelet" {
		t.Errorf("events passed on = %v, want the node's three", events)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := config.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
