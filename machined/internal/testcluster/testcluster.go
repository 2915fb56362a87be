// Package testcluster makes a cluster's configs and join tickets for tests, the way cairnctl gen config
// and a control plane's join service would.
package testcluster

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/pki"
)

// Cluster is a generated cluster.
type Cluster struct {
	*config.Generated
	ControlPlaneYAML, WorkerYAML []byte
}

// New generates a cluster with tmpfs volumes (sandbox tests have no disks).
func New(t testing.TB) *Cluster {
	t.Helper()
	tmp := &config.DiskSpec{Tmpfs: true}
	g, err := config.Generate(config.GenOptions{ClusterName: "test", Endpoint: "https://127.0.0.1:6443",
		State: tmp, Ephemeral: tmp, Etcd: tmp, Now: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Generated: g}
	if c.ControlPlaneYAML, err = config.Marshal(g.ControlPlane); err != nil {
		t.Fatal(err)
	}
	if c.WorkerYAML, err = config.Marshal(g.Worker); err != nil {
		t.Fatal(err)
	}
	return c
}

// MachineCA is the cluster's machine CA.
func (c *Cluster) MachineCA(t testing.TB) pki.KeyPair {
	t.Helper()
	ca, err := (pki.PEM{Cert: []byte(c.Secrets.MachineCA.Cert), Key: []byte(c.Secrets.MachineCA.Key)}).ParseCA()
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// Ticket issues a worker join ticket for the node whose PEM public key is given.
func (c *Cluster) Ticket(t testing.TB, publicKeyPEM []byte) *machine.JoinTicket {
	t.Helper()
	pub, err := pki.ParsePublicKey(publicKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	der, err := c.MachineCA(t).SignPublic(pki.Request{CommonName: "worker", Server: true, Client: true, DNSNames: []string{"machine.cairn.internal"}}, pub, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &machine.JoinTicket{
		ClusterName: c.Worker.Cluster.Name, ClusterId: c.Worker.Cluster.ID, Role: config.TypeWorker,
		MachineCa: []byte(c.Secrets.MachineCA.Cert), MachineCert: pki.EncodeCert(der), Config: c.WorkerYAML,
	}
}

// TicketBytes is Ticket, serialized.
func (c *Cluster) TicketBytes(t testing.TB, publicKeyPEM []byte) []byte {
	t.Helper()
	b, err := proto.Marshal(c.Ticket(t, publicKeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ClientContext signs a cairnconfig context with the given role.
func (c *Cluster) ClientContext(t testing.TB, role string) (cert, key []byte) {
	t.Helper()
	leaf, err := c.MachineCA(t).Sign(pki.Request{CommonName: role, Organization: []string{role}, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Cert, leaf.Key
}
