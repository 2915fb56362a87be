package server

import (
	"context"
	"io"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// TestRolesAreEnforcedOnEveryRPC: every RPC of the machine service, called with the client certificate
// of a role its row in the table does not list, is refused with PermissionDenied. The RPCs come from the
// service descriptor, so a new RPC is covered without a line here, and each is called with an empty
// request, as a hostile client would, so nothing but the role can refuse it.
func TestRolesAreEnforcedOnEveryRPC(t *testing.T) {
	s := serve(t)
	c := testcluster.New(t)
	initNode(t, s, c)
	svc := machine.Machine_ServiceDesc
	checked := 0
	for _, role := range []string{reader, operator} {
		cert, key := c.ClientContext(t, role)
		_, conn, err := client.Connect(client.Options{Endpoint: s.addr,
			Context: &client.Context{CA: c.Secrets.MachineCA.Cert, Cert: string(cert), Key: string(key)}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		refused := func(name string, call func(method string) error) {
			method := "/" + svc.ServiceName + "/" + name
			if slices.Contains(roles[method], role) {
				return
			}
			checked++
			if err := call(method); code(err) != codes.PermissionDenied {
				t.Errorf("%s as %s = %v, want PermissionDenied", name, role, err)
			}
		}
		ctx := context.Background()
		for _, m := range svc.Methods {
			refused(m.MethodName, func(method string) error {
				return conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
			})
		}
		for _, sd := range svc.Streams {
			refused(sd.StreamName, func(method string) error {
				st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: sd.ServerStreams, ClientStreams: sd.ClientStreams}, method)
				if err != nil {
					return err
				}
				if err := st.SendMsg(&emptypb.Empty{}); err != nil && err != io.EOF {
					return err
				}
				if err := st.CloseSend(); err != nil {
					return err
				}
				return st.RecvMsg(&emptypb.Empty{})
			})
		}
	}
	// Readers are refused the operators' and the admins' RPCs, operators the admins': far more than this.
	if checked < 20 {
		t.Fatalf("checked %d refusals; the role table or the descriptor walk lost RPCs", checked)
	}
}
