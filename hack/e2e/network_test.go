//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/hack/ntpserver"
)

// networkStatus is the JSON of `cairnctl network -o json`.
type networkStatus struct {
	Links []struct {
		Name      string   `json:"name"`
		Addresses []string `json:"addresses"`
		Static    bool     `json:"static"`
	} `json:"links"`
	Routes      []string `json:"routes"`
	Nameservers []string `json:"nameservers"`
	Search      []string `json:"search"`
	Problems    []string `json:"problems"`
}

// withNetworkConfig writes a copy of the node config at src whose machine.network gives the cluster NIC
// (eth1, 10.5.0.x from ip=) a second static address and a route, sets the resolver and a search domain,
// and names a NIC the VM does not have. eth0, QEMU's user network that carries the machine API, is left
// to DHCP. Its machine.time names timeServer.
func withNetworkConfig(t *testing.T, src, addr, timeServer string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	c.Machine.Network = config.Network{
		Interfaces: []config.Interface{
			{Name: "eth1", Addresses: []string{addr + "/24", "10.5.7.2/24"},
				Routes: []config.Route{{Network: "10.77.0.0/16", Gateway: "10.5.7.1", Metric: 30}}},
			{Name: "eth7", DHCP: true},
		},
		Nameservers: []string{"10.0.2.3"}, // QEMU's resolver, the one DHCP gives
		Search:      []string{"cairn.test"},
	}
	c.Machine.Time = config.Time{Servers: []string{timeServer}}
	out, err := config.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "network.yaml")
	if err := os.WriteFile(dst, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// checkNetworkConfig reads the node's network through `cairnctl network` and checks that the config's
// addresses, route, resolver and search domain are in force, and the missing NIC is reported.
func checkNetworkConfig(t *testing.T, mtls []string, addr string) {
	var n networkStatus
	ctlJSON(t, &n, append(mtls, "network")...)
	t.Logf("cairnctl network: %+v", n)
	var eth1 []string
	for _, l := range n.Links {
		if l.Name == "eth1" {
			eth1 = l.Addresses
			if !l.Static {
				t.Errorf("eth1 is not reported static: %+v", l)
			}
		}
	}
	for _, want := range []string{addr + "/24", "10.5.7.2/24"} {
		if !slices.Contains(eth1, want) {
			t.Errorf("eth1 addresses = %v, want %s among them", eth1, want)
		}
	}
	if !slices.Contains(n.Routes, "10.77.0.0/16 via 10.5.7.1 dev eth1 metric 30") {
		t.Errorf("routes = %q, want 10.77.0.0/16 via 10.5.7.1 dev eth1 metric 30", n.Routes)
	}
	if !slices.Equal(n.Nameservers, []string{"10.0.2.3"}) || !slices.Equal(n.Search, []string{"cairn.test"}) {
		t.Errorf("resolvers %v, search %v; want [10.0.2.3] and [cairn.test]", n.Nameservers, n.Search)
	}
	if len(n.Problems) != 1 || !strings.Contains(n.Problems[0], "machine.network.interfaces[1]: no interface eth7") {
		t.Errorf("problems = %q, want the missing eth7 reported as machine.network.interfaces[1]", n.Problems)
	}
	if out := mustCtl(t, time.Minute, append(mtls, "status")...); !strings.Contains(out, "1 part(s) of machine.network not applied") {
		t.Errorf("status does not mention the network config's problem:\n%s", out)
	}
}

// clockSkew is how far ahead of the host the test's time server runs: the node steps its clock forward by
// that much at Init. Forward, and by less than the hour every Cairn certificate is backdated, so the
// host's clients keep trusting the node's new certificates.
const clockSkew = 90 * time.Second

// serveTime starts an NTP server on the host, clockSkew ahead, and returns its address as a QEMU guest
// reaches it (10.0.2.2 is the host's loopback on QEMU's user network).
func serveTime(t *testing.T) string {
	srv, err := ntpserver.Listen("127.0.0.1:0", clockSkew)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return fmt.Sprintf("10.0.2.2:%d", srv.Port())
}

// checkClock: the node synced from the test's server and stepped its clock by about clockSkew.
func checkClock(t *testing.T, mtls []string, server string) {
	var st struct {
		Clock struct {
			Synced   bool   `json:"synced"`
			Server   string `json:"server"`
			OffsetNs string `json:"offset_ns"`
			Steps    int    `json:"steps"`
		} `json:"clock"`
	}
	ctlJSON(t, &st, append(mtls, "status")...)
	off, _ := strconv.ParseInt(st.Clock.OffsetNs, 10, 64)
	c := st.Clock
	// The last answer's offset is the first one's (the step) or, after the step, a few milliseconds.
	stepped := time.Duration(off) > clockSkew-10*time.Second || c.Steps >= 1
	if !c.Synced || c.Server != server || !stepped {
		t.Errorf("status clock = %+v, want synced from %s with a step of about %v", c, server, clockSkew)
	}
	if out := mustCtl(t, time.Minute, append(mtls, "status")...); !strings.Contains(out, "synced from "+server) {
		t.Errorf("status does not say where the clock comes from:\n%s", out)
	}
}

// checkConfig: the node shows its config (secrets only to the admin asking for them), and apply --dry-run
// finds nothing to do for the config it was made with and classifies a change.
func checkConfig(t *testing.T, mtls []string, nodeConfig string) {
	if out := mustCtl(t, time.Minute, append(mtls, "get", "config")...); !strings.Contains(out, "key: REDACTED") {
		t.Errorf("get config shows no redacted key:\n%.2000s", out)
	}
	if out := mustCtl(t, time.Minute, append(mtls, "get", "config", "--show-secrets")...); strings.Contains(out, "REDACTED") || !strings.Contains(out, "PRIVATE KEY") {
		t.Errorf("get config --show-secrets as admin shows no key")
	}
	if out := mustCtl(t, time.Minute, append(mtls, "apply", "--config", nodeConfig, "--dry-run")...); !strings.Contains(out, "no change") {
		t.Errorf("apply --dry-run of the node's own config:\n%s", out)
	}
	b, err := os.ReadFile(nodeConfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	c.Machine.Kubelet.ExtraArgs = map[string]string{"v": "3"}
	out, _ := config.Marshal(c)
	changed := filepath.Join(t.TempDir(), "changed.yaml")
	if err := os.WriteFile(changed, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustCtl(t, time.Minute, append(mtls, "apply", "--config", changed, "--dry-run")...); !strings.Contains(got, "machine.kubelet.extraArgs.v  live") {
		t.Errorf("apply --dry-run of a kubelet flag:\n%s", got)
	}
}
