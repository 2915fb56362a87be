package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/testcluster"
)

// TestGetConfig: the config in force, redacted for every role, with its secrets for an admin only; a node
// in maintenance has none to give.
func TestGetConfig(t *testing.T) {
	s := serveDay2(t, nil, nil, nil)
	ctx := context.Background()
	if _, err := maintenanceClient(t, s).GetConfig(ctx, &machine.GetConfigRequest{}); code(err) != codes.FailedPrecondition {
		t.Fatalf("GetConfig in maintenance = %v, want FailedPrecondition", err)
	}
	c := testcluster.New(t)
	initNode(t, s, c)
	as := func(role string) machine.MachineClient {
		cert, key := c.ClientContext(t, role)
		return dial(t, client.Options{Endpoint: s.addr, Context: &client.Context{CA: c.Secrets.MachineCA.Cert, Cert: string(cert), Key: string(key)}})
	}
	key := strings.Split(strings.TrimSpace(c.Secrets.EtcdCA.Key), "\n")[1]
	for _, tc := range []struct {
		role    string
		secrets bool
		code    codes.Code
		hasKey  bool
	}{
		{client.RoleReader, false, codes.OK, false},
		{client.RoleReader, true, codes.PermissionDenied, false},
		{client.RoleOperator, true, codes.PermissionDenied, false},
		{client.RoleAdmin, false, codes.OK, false},
		{client.RoleAdmin, true, codes.OK, true},
	} {
		r, err := as(tc.role).GetConfig(ctx, &machine.GetConfigRequest{ShowSecrets: tc.secrets})
		if code(err) != tc.code {
			t.Errorf("GetConfig(show secrets %t) as %s = %v, want %v", tc.secrets, tc.role, err, tc.code)
			continue
		}
		if err != nil {
			continue
		}
		got := string(r.Config)
		if strings.Contains(got, key) != tc.hasKey || r.Redacted == tc.hasKey || !strings.Contains(got, "name: "+c.ControlPlane.Cluster.Name) {
			t.Errorf("GetConfig(show secrets %t) as %s: key shown %t, redacted %t; want the key shown %t", tc.secrets, tc.role,
				strings.Contains(got, key), r.Redacted, tc.hasKey)
		}
	}
}
