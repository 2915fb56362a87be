package server

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/node"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

const token = "t0k"

type testServer struct {
	addr  string
	creds *Credentials
	node  *node.Node
	bus   *events.Bus
}

type noSys struct{}

func (noSys) Reboot() error   { return nil }
func (noSys) PowerOff() error { return nil }

// serve starts a test server without the day-2 sources.
func serve(t *testing.T) *testServer { return serveDay2(t, nil, nil, nil) }

func dial(t *testing.T, o client.Options) machine.MachineClient {
	t.Helper()
	c, conn, err := client.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return c
}

func code(err error) codes.Code { return status.Code(err) }

// initNode inits the node through the API and waits until it is Running.
func initNode(t *testing.T, s *testServer, c *testcluster.Cluster) {
	t.Helper()
	mc := dial(t, client.Options{Endpoint: s.addr, Token: token, Fingerprint: s.creds.Fingerprint()})
	stream, err := mc.Init(context.Background(), &machine.InitRequest{Config: c.ControlPlaneYAML})
	if err != nil {
		t.Fatal(err)
	}
	var last *machine.Event
	for {
		e, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Init stream: %v", err)
		}
		last = e
	}
	if last == nil || last.Kind != events.KindSequence || last.Outcome != events.Done || last.State != "Running" {
		t.Fatalf("Init stream ended with %v, want the init sequence done in Running", last)
	}
}

func TestMaintenanceAuth(t *testing.T) {
	s := serve(t)
	tests := []struct {
		name string
		o    client.Options
		want codes.Code
	}{
		{"token and pinned fingerprint", client.Options{Token: token, Fingerprint: s.creds.Fingerprint()}, codes.OK},
		{"token, fingerprint with colons", client.Options{Token: token, Fingerprint: colons(s.creds.Fingerprint())}, codes.OK},
		{"token, insecure", client.Options{Token: token, InsecureSkipVerify: true}, codes.OK},
		{"wrong token", client.Options{Token: "nope", InsecureSkipVerify: true}, codes.Unauthenticated},
		{"wrong fingerprint", client.Options{Token: token, Fingerprint: strings.Repeat("ab", 32)}, codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Endpoint = s.addr
			st, err := dial(t, tc.o).Status(context.Background(), &machine.StatusRequest{})
			if code(err) != tc.want {
				t.Fatalf("Status() = %v, want code %v", err, tc.want)
			}
			if err == nil && (st.State != "Boot" || st.ApiMode != "maintenance") {
				t.Errorf("Status() = %v, want Boot in maintenance", st)
			}
		})
	}
	t.Run("no token at all", func(t *testing.T) {
		// The client library refuses to call without credentials; a raw caller is refused by the server.
		_, err := dial(t, client.Options{Endpoint: s.addr, Token: " ", InsecureSkipVerify: true}).Version(context.Background(), &machine.VersionRequest{})
		if code(err) != codes.Unauthenticated {
			t.Fatalf("Version() without a token = %v, want Unauthenticated", err)
		}
	})
}

func TestHealthNeedsNoCredentials(t *testing.T) {
	s := serve(t)
	conn, err := client.Dial(client.Options{Endpoint: s.addr, Token: "ignored", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", r, err)
	}
}

func TestBadConfigIsInvalidArgumentWithEveryPath(t *testing.T) {
	s := serve(t)
	c := testcluster.New(t)
	bad := strings.NewReplacer("type: controlplane", "type: master", "podCIDR: 10.244.0.0/16", "podCIDR: 10.96.0.0/16",
		"endpoint: https://127.0.0.1:6443", "endpoint: 127.0.0.1:6443").Replace(string(c.ControlPlaneYAML))
	mc := dial(t, client.Options{Endpoint: s.addr, Token: token, InsecureSkipVerify: true})
	stream, err := mc.Init(context.Background(), &machine.InitRequest{Config: []byte(bad)})
	if err == nil {
		_, err = stream.Recv()
	}
	if code(err) != codes.InvalidArgument {
		t.Fatalf("Init(bad) = %v, want InvalidArgument", err)
	}
	for _, p := range []string{"machine.type", "cluster.network.podCIDR", "cluster.endpoint", "3 problem(s)"} {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
	st, _ := mc.Status(context.Background(), &machine.StatusRequest{})
	if st.State != "Boot" || st.LockedBy != "" {
		t.Errorf("after a refused Init: %v, want Boot and unlocked", st)
	}
}

func TestMutualTLSAfterTheLock(t *testing.T) {
	s := serve(t)
	c := testcluster.New(t)
	initNode(t, s, c)

	ctxFor := func(role string) *client.Context {
		cert, key := c.ClientContext(t, role)
		return &client.Context{CA: c.Secrets.MachineCA.Cert, Cert: string(cert), Key: string(key)}
	}
	other := testcluster.New(t) // another cluster's CA
	ocert, okey := other.ClientContext(t, client.RoleAdmin)
	otherCtx := &client.Context{CA: c.Secrets.MachineCA.Cert, Cert: string(ocert), Key: string(okey)}

	ctx := context.Background()
	tests := []struct {
		name string
		o    client.Options
		call func(machine.MachineClient) error
		want codes.Code
	}{
		{"admin status", client.Options{Context: ctxFor(client.RoleAdmin)}, status_, codes.OK},
		{"reader status", client.Options{Context: ctxFor(client.RoleReader)}, status_, codes.OK},
		{"token alone", client.Options{Token: token, InsecureSkipVerify: true}, status_, codes.Unauthenticated},
		{"another cluster's CA", client.Options{Context: otherCtx}, status_, codes.Unavailable},
		{"reader reset", client.Options{Context: ctxFor(client.RoleReader)}, reset, codes.PermissionDenied},
		{"operator reset", client.Options{Context: ctxFor(client.RoleOperator)}, reset, codes.PermissionDenied},
		{"reader kubeconfig (a secret)", client.Options{Context: ctxFor(client.RoleReader)}, kubeconfig, codes.PermissionDenied},
		{"operator kubeconfig", client.Options{Context: ctxFor(client.RoleOperator)}, kubeconfig, codes.PermissionDenied},
		{"reader reboot", client.Options{Context: ctxFor(client.RoleReader)}, reboot, codes.PermissionDenied},
		{"reader profile", client.Options{Context: ctxFor(client.RoleReader)}, profileHeap, codes.PermissionDenied},
		{"operator profile", client.Options{Context: ctxFor(client.RoleOperator)}, profileHeap, codes.PermissionDenied},
		{"admin init again", client.Options{Context: ctxFor(client.RoleAdmin)}, func(mc machine.MachineClient) error {
			s, err := mc.Init(ctx, &machine.InitRequest{Config: c.ControlPlaneYAML})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}, codes.Aborted},
		{"admin reset", client.Options{Context: ctxFor(client.RoleAdmin)}, reset, codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Endpoint = s.addr
			if err := tc.call(dial(t, tc.o)); code(err) != tc.want {
				t.Fatalf("call = %v, want code %v", err, tc.want)
			}
		})
	}
}

func status_(mc machine.MachineClient) error {
	st, err := mc.Status(context.Background(), &machine.StatusRequest{})
	if err == nil && st.ApiMode != "mtls" {
		return status.Errorf(codes.Internal, "api mode %s", st.ApiMode)
	}
	return err
}

func reset(mc machine.MachineClient) error {
	_, err := mc.Reset(context.Background(), &machine.ResetRequest{Wipe: []string{"state"}})
	return err
}

func reboot(mc machine.MachineClient) error {
	_, err := mc.Reboot(context.Background(), &machine.RebootRequest{})
	return err
}

func profileHeap(mc machine.MachineClient) error {
	s, err := mc.Profile(context.Background(), &machine.ProfileRequest{Name: "heap"})
	if err == nil {
		_, err = s.Recv()
	}
	return err
}

func kubeconfig(mc machine.MachineClient) error {
	_, err := mc.Kubeconfig(context.Background(), &machine.KubeconfigRequest{})
	return err
}

func TestEveryRPCHasRoles(t *testing.T) {
	for _, m := range machine.Machine_ServiceDesc.Methods {
		if _, ok := roles["/"+machine.Machine_ServiceDesc.ServiceName+"/"+m.MethodName]; !ok {
			t.Errorf("RPC %s is missing from the role table", m.MethodName)
		}
	}
	for _, m := range machine.Machine_ServiceDesc.Streams {
		if _, ok := roles["/"+machine.Machine_ServiceDesc.ServiceName+"/"+m.StreamName]; !ok {
			t.Errorf("RPC %s is missing from the role table", m.StreamName)
		}
	}
	for method, rs := range roles {
		for _, secret := range []string{"Reset", "Kubeconfig", "EtcdSnapshot", "CreateJoinToken", "Init", "Join"} {
			if strings.HasSuffix(method, "/"+secret) && (len(rs) != 1 || rs[0] != admin) {
				t.Errorf("%s allows %v; only admins may", method, rs)
			}
		}
	}
}

func TestWrongStateIsFailedPrecondition(t *testing.T) {
	s := serve(t)
	mc := dial(t, client.Options{Endpoint: s.addr, Token: token, InsecureSkipVerify: true})
	if _, err := mc.Shutdown(context.Background(), &machine.ShutdownRequest{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && s.node.Status().Sequence != ""; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	_, err := mc.Reboot(context.Background(), &machine.RebootRequest{})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "state Shutdown") {
		t.Fatalf("Reboot after Shutdown = %v, want FailedPrecondition naming state Shutdown", err)
	}
}

func colons(hex string) string {
	var b strings.Builder
	for i := 0; i < len(hex); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(hex[i : i+2])
	}
	return b.String()
}

// Before the node has read its lock no call is served; a node whose boot failed there (an encrypted STATE
// its TPM will not open) says why to every caller instead of "booting".
func TestUndecidedRefusal(t *testing.T) {
	creds, err := NewCredentials("n1", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a := &Auth{Creds: creds, Token: token}
	if err := a.authorize(context.Background(), machine.Machine_Status_FullMethodName); code(err) != codes.Unavailable {
		t.Errorf("Status while booting = %v, want Unavailable", err)
	}
	creds.Stuck("mount STATE from /dev/vdb: the TPM does not give its key back")
	err = a.authorize(context.Background(), machine.Machine_Status_FullMethodName)
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the TPM does not give its key back") {
		t.Errorf("Status of a stuck node = %v, want FailedPrecondition with the reason", err)
	}
}
