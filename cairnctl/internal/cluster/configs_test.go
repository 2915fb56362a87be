package cluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/pki"
)

func TestGenerateConfigs(t *testing.T) {
	l, err := Plan("demo", 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	c, err := GenerateConfigs("demo", l, now, false)
	if err != nil {
		t.Fatalf("GenerateConfigs() = %v", err)
	}
	if len(c.Nodes) != 3 {
		t.Fatalf("GenerateConfigs() made %d node configs, want 3", len(c.Nodes))
	}
	for _, n := range l.Nodes {
		nc := c.Nodes[n.Name]
		if err := config.Validate(nc); err != nil {
			t.Errorf("node %s: config does not validate: %v", n.Name, err)
		}
		if nc.Machine.Type != n.Role {
			t.Errorf("node %s: machine.type = %s, want %s", n.Name, nc.Machine.Type, n.Role)
		}
		if nc.Machine.Hostname != n.Name {
			t.Errorf("node %s: machine.hostname = %q, want %q", n.Name, nc.Machine.Hostname, n.Name)
		}
		if nc.Machine.Kubelet.NodeIP != n.Address.String() {
			t.Errorf("node %s: machine.kubelet.nodeIP = %q, want its L2 address %s", n.Name, nc.Machine.Kubelet.NodeIP, n.Address)
		}
		if nc.Cluster.Endpoint != "https://10.5.0.2:6443" {
			t.Errorf("node %s: cluster.endpoint = %q, want the first control plane's L2 address", n.Name, nc.Cluster.Endpoint)
		}
		if nc.Cluster.ID != c.ControlPlane.Cluster.ID {
			t.Errorf("node %s: cluster.id = %s, want the cluster's %s", n.Name, nc.Cluster.ID, c.ControlPlane.Cluster.ID)
		}
		switch n.Role {
		case RoleControlPlane:
			if nc.Cluster.Secrets == nil || nc.Machine.Disks.Etcd == nil || nc.Machine.Disks.Etcd.Serial != SerialEtcd {
				t.Errorf("control plane %s: want the secrets and an etcd disk with serial %s", n.Name, SerialEtcd)
			}
			// Emulated CPUs stall: etcd's leader must survive a late heartbeat.
			if e := nc.Cluster.Etcd.ExtraArgs; e["heartbeat-interval"] != "500" || e["election-timeout"] != "5000" {
				t.Errorf("control plane %s: etcd extraArgs = %v, want the emulation timings", n.Name, e)
			}
		case RoleWorker:
			if nc.Cluster.Secrets != nil {
				t.Errorf("worker %s carries the cluster secrets", n.Name)
			}
		}
		if nc.Machine.Disks.State.Serial != SerialState || nc.Machine.Disks.Ephemeral.Serial != SerialEphemeral {
			t.Errorf("node %s: disks select serials %q and %q, want %s and %s", n.Name,
				nc.Machine.Disks.State.Serial, nc.Machine.Disks.Ephemeral.Serial, SerialState, SerialEphemeral)
		}
	}
	// The templates stay generic: they are what a user copies for a node of their own.
	if c.ControlPlane.Machine.Hostname != "" || c.Worker.Machine.Kubelet.NodeIP != "" {
		t.Errorf("the templates were changed by the per-node configs: hostname %q, nodeIP %q",
			c.ControlPlane.Machine.Hostname, c.Worker.Machine.Kubelet.NodeIP)
	}
}

// The context written to cairnconfig holds an admin certificate that chains to the cluster's machine
// CA: that is what every node checks after its lock.
func TestClientContext(t *testing.T) {
	now := time.Now()
	s, err := config.GenerateSecrets(now)
	if err != nil {
		t.Fatal(err)
	}
	eps := []string{"127.0.0.1:40000", "127.0.0.1:40010"}
	ctx, err := ClientContext(s, eps, now)
	if err != nil {
		t.Fatalf("ClientContext() = %v", err)
	}
	if len(ctx.Endpoints) != 2 || ctx.Endpoints[1] != eps[1] {
		t.Errorf("ClientContext().Endpoints = %v, want %v", ctx.Endpoints, eps)
	}
	cert, err := pki.ParseCert([]byte(ctx.Cert))
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != client.RoleAdmin {
		t.Errorf("client certificate organization = %v, want [%s]", cert.Subject.Organization, client.RoleAdmin)
	}
	ca, err := pki.ParseCert([]byte(s.MachineCA.Cert))
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		t.Errorf("admin certificate is not signed by the machine CA: %v", err)
	}
}

func TestWriteConfigs(t *testing.T) {
	dir := t.TempDir()
	l, _ := Plan("w", 1, 1, nil)
	c, err := GenerateConfigs("w", l, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeConfigs(dir, c, l); err != nil {
		t.Fatalf("writeConfigs() = %v", err)
	}
	for _, f := range []string{SecretsFile, ControlPlaneCfg, WorkerCfg, filepath.Join(nodesDir, "w-cp1", NodeConfigFile), filepath.Join(nodesDir, "w-w1", NodeConfigFile)} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("writeConfigs() did not write %s: %v", f, err)
			continue
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600 (it may hold private keys)", f, fi.Mode().Perm())
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, nodesDir, "w-w1", NodeConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	w, err := config.Parse(data)
	if err != nil {
		t.Fatalf("worker config does not parse back: %v", err)
	}
	if w.Machine.Kubelet.NodeIP != "10.5.0.3" {
		t.Errorf("worker config nodeIP = %q, want 10.5.0.3", w.Machine.Kubelet.NodeIP)
	}
}
