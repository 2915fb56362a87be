package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func generated(t *testing.T) *Generated {
	t.Helper()
	g, err := Generate(GenOptions{ClusterName: "demo", Endpoint: "https://10.5.0.2:6443", Now: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func roundTrip(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGeneratedConfigsRoundTrip(t *testing.T) {
	g := generated(t)
	for name, c := range map[string]*MachineConfig{"controlplane": g.ControlPlane, "worker": g.Worker} {
		got, err := Parse(roundTrip(t, c))
		if err != nil {
			t.Fatalf("%s: Parse(Marshal(c)) = %v", name, err)
		}
		if err := Validate(got); err != nil {
			t.Fatalf("%s: generated config does not validate: %v", name, err)
		}
		if diff := cmp.Diff(c, got); diff != "" {
			t.Errorf("%s: round trip changed the config (-want +got):\n%s", name, diff)
		}
	}
	s, err := ParseSecrets(roundTrip(t, g.Secrets))
	if err != nil || ValidateSecrets(s) != nil {
		t.Fatalf("secrets round trip: %v / %v", err, ValidateSecrets(s))
	}
	if g.Worker.Cluster.Secrets != nil {
		t.Error("the worker config carries the cluster's secrets")
	}
}

func TestTmpfsVolumesRoundTrip(t *testing.T) {
	tmp := &DiskSpec{Tmpfs: true}
	g, err := Generate(GenOptions{ClusterName: "demo", Endpoint: "https://h:6443", State: tmp, Ephemeral: tmp, Etcd: tmp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := roundTrip(t, g.ControlPlane)
	if !strings.Contains(string(b), "etcd: tmpfs") {
		t.Errorf("marshalled config lacks `etcd: tmpfs`:\n%s", b)
	}
	c, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Machine.Disks.Etcd == nil || !c.Machine.Disks.Etcd.Tmpfs || !c.Machine.Disks.State.Tmpfs {
		t.Errorf("tmpfs volumes lost in the round trip: %+v", c.Machine.Disks)
	}
}

func TestParseRefusesBadDocuments(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"empty", "", []string{"empty"}},
		{"whitespace", "  \n\n", []string{"empty"}},
		{"not a mapping", "- a\n- b\n", []string{"mapping"}},
		{"bad yaml", "apiVersion: [\n", []string{"not valid YAML"}},
		{"two documents", "apiVersion: a\n---\napiVersion: b\n", []string{"more than one"}},
		{"wrong kind", "apiVersion: cairn.dev/v1alpha1\nkind: Pod\n", []string{"kind: must be \"MachineConfig\""}},
		{"wrong version", "apiVersion: v1\nkind: MachineConfig\n", []string{"apiVersion: must be"}},
		{"unknown fields with paths", "apiVersion: cairn.dev/v1alpha1\nkind: MachineConfig\nmachine:\n  tpye: worker\n  disks:\n    etcd:\n      serail: x\ncluster:\n  network:\n    podCidr: 10.0.0.0/8\n",
			[]string{"machine.tpye: unknown field (line 4)", "machine.disks.etcd.serail: unknown field", "cluster.network.podCidr: unknown field", "3 problem(s)"}},
		{"unknown field in a registry", "apiVersion: cairn.dev/v1alpha1\nkind: MachineConfig\nmachine:\n  registries:\n    docker.io:\n      mirror: [https://m]\n",
			[]string{`machine.registries["docker.io"].mirror: unknown field (line 6)`}},
		{"bad disk scalar", "apiVersion: cairn.dev/v1alpha1\nkind: MachineConfig\nmachine:\n  disks:\n    state: ramdisk\n", []string{"either \"tmpfs\""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tc.doc)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse() error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	g := generated(t)
	c := g.ControlPlane
	c.Machine.Type = "master"
	c.Cluster.Network.PodCIDR = "10.96.0.0/16" // inside the service CIDR
	c.Cluster.Endpoint = "10.5.0.2:6443"
	c.Cluster.KubernetesVersion = "v1.99.0"
	c.Cluster.Secrets.KubernetesCA.Cert = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
	c.Machine.Disks.State = DiskSpec{}
	err := Validate(c)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Validate() = %v, want Errors", err)
	}
	want := []string{"machine.type", "machine.disks.state", "cluster.endpoint", "cluster.kubernetesVersion", "cluster.network.podCIDR", "cluster.secrets.kubernetesCA"}
	if diff := cmp.Diff(want, errs.Paths()); diff != "" {
		t.Errorf("paths (-want +got):\n%s\nfull error: %v", diff, err)
	}
}

func TestValidateFields(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *MachineConfig)
		path   string // "" means valid
	}{
		{"ok", func(*MachineConfig) {}, ""},
		{"vip that is the endpoint's address", func(c *MachineConfig) {
			c.Cluster.Endpoint, c.Cluster.VIP = "https://10.5.0.100:6443", "10.5.0.100"
		}, ""},
		{"vip behind a name", func(c *MachineConfig) {
			c.Cluster.Endpoint, c.Cluster.VIP = "https://api.example.com:6443", "10.5.0.100"
		}, ""},
		{"tmpfs ephemeral", func(c *MachineConfig) { c.Machine.Disks.Ephemeral = DiskSpec{Tmpfs: true} }, ""},
		{"encrypted state", func(c *MachineConfig) { c.Machine.Disks.State.Encryption = EncryptionTPM }, ""},
		{"controlplane without etcd disk", func(c *MachineConfig) { c.Machine.Disks.Etcd = nil }, "machine.disks.etcd"},
		{"bad filesystem", func(c *MachineConfig) { c.Machine.Disks.State.Filesystem = "ntfs" }, "machine.disks.state.filesystem"},
		{"unknown encryption", func(c *MachineConfig) { c.Machine.Disks.State.Encryption = "password" }, "machine.disks.state.encryption"},
		{"encrypted ephemeral", func(c *MachineConfig) { c.Machine.Disks.Ephemeral.Encryption = EncryptionTPM }, "machine.disks.ephemeral.encryption"},
		{"relative path", func(c *MachineConfig) { c.Machine.Disks.State = DiskSpec{Selector: Selector{Path: "sdb"}} }, "machine.disks.state.path"},
		{"sizes reversed", func(c *MachineConfig) {
			c.Machine.Disks.State = DiskSpec{Selector: Selector{MinSize: 10 << 30, MaxSize: 1 << 30}}
		}, "machine.disks.state.minSize"},
		{"endpoint not a URL", func(c *MachineConfig) { c.Cluster.Endpoint = "not a url" }, "cluster.endpoint"},
		{"endpoint http", func(c *MachineConfig) { c.Cluster.Endpoint = "http://h:6443" }, "cluster.endpoint"},
		{"vip not an address", func(c *MachineConfig) { c.Cluster.VIP = "10.5.0" }, "cluster.vip"},
		{"vip is not the endpoint's address", func(c *MachineConfig) {
			c.Cluster.Endpoint, c.Cluster.VIP = "https://10.5.0.2:6443", "10.5.0.100"
		}, "cluster.vip"},
		{"bad service cidr", func(c *MachineConfig) { c.Cluster.Network.ServiceCIDR = "10.96.0.0" }, "cluster.network.serviceCIDR"},
		{"bad name", func(c *MachineConfig) { c.Cluster.Name = "Demo_1" }, "cluster.name"},
		{"bad id", func(c *MachineConfig) { c.Cluster.ID = "xyz" }, "cluster.id"},
		{"bad hostname", func(c *MachineConfig) { c.Machine.Hostname = "-x" }, "machine.hostname"},
		{"upgrade key", func(c *MachineConfig) {
			c.Machine.Upgrade.PublicKey = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
		}, ""},
		{"upgrade key not Ed25519", func(c *MachineConfig) { c.Machine.Upgrade.PublicKey = "c2hvcnQ=" }, "machine.upgrade.publicKey"},
		{"node labels and taints", func(c *MachineConfig) {
			c.Machine.NodeLabels = map[string]string{"node-role.kubernetes.io/gpu": "", "example.com/rack": "r1"}
			c.Machine.NodeTaints = []NodeTaint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}, {Key: "dedicated", Effect: "NoExecute"}}
		}, ""},
		{"node label key with a space", func(c *MachineConfig) { c.Machine.NodeLabels = map[string]string{"rack one": "x"} }, "machine.nodeLabels.rack one"},
		{"node label value too long", func(c *MachineConfig) {
			c.Machine.NodeLabels = map[string]string{"rack": strings.Repeat("x", 64)}
		}, "machine.nodeLabels.rack"},
		{"node label NodeRestriction keeps from nodes", func(c *MachineConfig) {
			c.Machine.NodeLabels = map[string]string{"node-restriction.kubernetes.io/secure": "yes"}
		}, "machine.nodeLabels.node-restriction.kubernetes.io/secure"},
		{"node label in a subdomain of NodeRestriction's", func(c *MachineConfig) {
			c.Machine.NodeLabels = map[string]string{"pci.node-restriction.kubernetes.io/x": "y"}
		}, "machine.nodeLabels.pci.node-restriction.kubernetes.io/x"},
		{"node label that makes a control plane", func(c *MachineConfig) {
			c.Machine.NodeLabels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}, "machine.nodeLabels.node-role.kubernetes.io/control-plane"},
		{"node taint without effect", func(c *MachineConfig) { c.Machine.NodeTaints = []NodeTaint{{Key: "dedicated"}} }, "machine.nodeTaints[0]"},
		{"node taint twice", func(c *MachineConfig) {
			c.Machine.NodeTaints = []NodeTaint{{Key: "a", Effect: "NoSchedule"}, {Key: "a", Value: "v", Effect: "NoSchedule"}}
		}, "machine.nodeTaints[1]"},
		{"install disk path not a device", func(c *MachineConfig) { c.Machine.Install.Disk.Path = "vdb" }, "machine.install.disk.path"},
		{"install disk sizes crossed", func(c *MachineConfig) {
			c.Machine.Install.Disk.MinSize, c.Machine.Install.Disk.MaxSize = 10<<30, 1<<30
		}, "machine.install.disk.minSize"},
		{"static address", func(c *MachineConfig) {
			c.Machine.Network.Interfaces = []Interface{{Name: "eth0", Addresses: []string{"10.5.0.2"}}}
		}, "machine.network.interfaces[0].addresses[0]"},
		{"static network", func(c *MachineConfig) {
			c.Machine.Network = Network{Interfaces: []Interface{
				{Name: "bond0", Bond: &Bond{Mode: BondActiveBackup, Interfaces: []string{"eth1", "eth2"}}},
				{Name: "bond0.20", VLAN: &VLAN{Parent: "bond0", ID: 20}, Addresses: []string{"10.20.0.5/24"},
					Routes: []Route{{Network: "10.30.0.0/16", Gateway: "10.20.0.1", Metric: 50}}},
			}, Nameservers: []string{"10.20.0.53"}, Search: []string{"lab.example"}}
		}, ""},
		{"interface twice", func(c *MachineConfig) {
			c.Machine.Network.Interfaces = []Interface{{Name: "eth0", DHCP: true}, {Name: "eth0", DHCP: true}}
		}, "machine.network.interfaces[1].name"},
		{"bond mode", func(c *MachineConfig) {
			c.Machine.Network.Interfaces = []Interface{{Name: "bond0", Bond: &Bond{Mode: "balance-xor", Interfaces: []string{"eth1"}}}}
		}, "machine.network.interfaces[0].bond.mode"},
		{"bond member configured", func(c *MachineConfig) {
			c.Machine.Network.Interfaces = []Interface{{Name: "eth1", DHCP: true},
				{Name: "bond0", Bond: &Bond{Mode: BondLACP, Interfaces: []string{"eth1"}}}}
		}, "machine.network.interfaces[1].bond.interfaces[0]"},
		{"vlan id", func(c *MachineConfig) {
			c.Machine.Network.Interfaces = []Interface{{Name: "eth0.5000", VLAN: &VLAN{Parent: "eth0", ID: 5000}}}
		}, "machine.network.interfaces[0].vlan.id"},
		{"route network", func(c *MachineConfig) {
			c.Machine.Network.Interfaces = []Interface{{Name: "eth1", Routes: []Route{{Network: "10.30.0.0"}}}}
		}, "machine.network.interfaces[0].routes[0].network"},
		{"long interface name", func(c *MachineConfig) {
			c.Machine.Network.Interfaces = []Interface{{Name: "averylonginterfacename", DHCP: true}}
		}, "machine.network.interfaces[0].name"},
		{"search domain", func(c *MachineConfig) { c.Machine.Network.Search = []string{"a b"} }, "machine.network.search[0]"},
		{"time servers", func(c *MachineConfig) {
			c.Machine.Time = Time{Servers: []string{"ntp.example.com", "10.0.2.2:10123", "[fd00::1]:123"}, BootWait: "30s"}
		}, ""},
		{"time server port", func(c *MachineConfig) { c.Machine.Time.Servers = []string{"10.0.2.2:99999"} }, "machine.time.servers[0]"},
		{"time boot wait", func(c *MachineConfig) { c.Machine.Time.BootWait = "ten seconds" }, "machine.time.bootWait"},
		{"dashed extra arg", func(c *MachineConfig) { c.Cluster.APIServer.ExtraArgs = map[string]string{"--v": "2"} }, "cluster.apiServer.extraArgs"},
		{"malformed CA key", func(c *MachineConfig) { c.Cluster.Secrets.EtcdCA.Key = "junk" }, "cluster.secrets.etcdCA"},
		{"bad bootstrap token", func(c *MachineConfig) { c.Cluster.Secrets.BootstrapToken = "abc" }, "cluster.secrets.bootstrapToken"},
		{"join endpoint", func(c *MachineConfig) { c.Cluster.Join = &Join{Endpoints: []string{"h:99999"}} }, "cluster.join.endpoints[0]"},
		{"bridge network", func(c *MachineConfig) { c.Cluster.Network.CNI = CNIBridge }, ""},
		{"unknown network", func(c *MachineConfig) { c.Cluster.Network.CNI = "calico" }, "cluster.network.cni"},
		{"iptables proxy", func(c *MachineConfig) { c.Cluster.Proxy.Mode = ProxyIPTables }, ""},
		{"ipvs proxy", func(c *MachineConfig) { c.Cluster.Proxy.Mode = "ipvs" }, "cluster.proxy.mode"},
		{"proxy extra arg", func(c *MachineConfig) { c.Cluster.Proxy.ExtraArgs = map[string]string{"v=2": ""} }, "cluster.proxy.extraArgs"},
		{"negative replicas", func(c *MachineConfig) { c.Cluster.CoreDNS.Replicas = -1 }, "cluster.coreDNS.replicas"},
		{"registry with mirror and credentials", func(c *MachineConfig) {
			c.Machine.Registries = map[string]Registry{"docker.io": {Mirrors: []string{"https://mirror.example.com:5000/v2", "http://10.5.0.1:5000"}},
				"mirror.example.com:5000": {Username: "u", Password: "p", InsecureSkipVerify: true}}
		}, ""},
		{"registry host with scheme", func(c *MachineConfig) {
			c.Machine.Registries = map[string]Registry{"https://docker.io": {}}
		}, `machine.registries["https://docker.io"]`},
		{"mirror without scheme", func(c *MachineConfig) {
			c.Machine.Registries = map[string]Registry{"docker.io": {Mirrors: []string{"mirror.example.com"}}}
		}, `machine.registries["docker.io"].mirrors[0]`},
		{"registry CA not PEM", func(c *MachineConfig) {
			c.Machine.Registries = map[string]Registry{"ghcr.io": {CA: "junk"}}
		}, `machine.registries["ghcr.io"].ca`},
		{"registry user without password", func(c *MachineConfig) {
			c.Machine.Registries = map[string]Registry{"localhost:5000": {Username: "u"}}
		}, `machine.registries["localhost:5000"].password`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := generated(t).ControlPlane
			tc.mutate(c)
			err := Validate(c)
			if tc.path == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want valid", err)
				}
				return
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != tc.path {
				t.Fatalf("Validate() = %v, want one problem at %s", err, tc.path)
			}
		})
	}
}

func TestWorkerRules(t *testing.T) {
	g := generated(t)
	w := g.Worker
	w.Cluster.Secrets = g.Secrets
	etcd := DefaultDisk("etcd")
	w.Machine.Disks.Etcd = &etcd
	var errs Errors
	if err := Validate(w); !errors.As(err, &errs) {
		t.Fatalf("Validate() = %v", err)
	}
	if diff := cmp.Diff([]string{"machine.disks.etcd", "cluster.secrets"}, errs.Paths()); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

func TestSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		bad  bool
	}{
		{"4096", 4096, false}, {"512MiB", 512 << 20, false}, {"10GiB", 10 << 30, false}, {"1.5GiB", 3 << 29, false},
		{"1GB", 1e9, false}, {"2T", 2 << 40, false}, {"-1", 0, true}, {"ten", 0, true}, {"5 XB", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseSize(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, bad=%v", tc.in, got, err, tc.want, tc.bad)
		}
	}
	if s := Size(10 << 30).String(); s != "10GiB" {
		t.Errorf("Size(10GiB).String() = %q", s)
	}
}

func TestRandomToken(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		tok := RandomToken()
		if !bootstrapToken.MatchString(tok) {
			t.Fatalf("RandomToken() = %q, not in kubeadm's format", tok)
		}
		if seen[tok] {
			t.Fatalf("RandomToken() repeated %q", tok)
		}
		seen[tok] = true
	}
}
