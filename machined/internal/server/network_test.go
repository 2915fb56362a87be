package server

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
)

type fakeNetwork struct {
	st     netcfg.State
	routes []string
	err    error
}

func (f fakeNetwork) State() netcfg.State       { return f.st }
func (f fakeNetwork) Routes() ([]string, error) { return f.routes, f.err }

func TestNetworkStatus(t *testing.T) {
	pfx := netip.MustParsePrefix
	n := fakeNetwork{st: netcfg.State{
		Addrs:       map[string][]netip.Prefix{"eth1": {pfx("10.5.0.2/24")}, "eth0": {pfx("10.0.2.15/24")}},
		Static:      map[string]bool{"eth1": true},
		Nameservers: []netip.Addr{netip.MustParseAddr("10.5.0.53")},
		Search:      []string{"lab.example"},
		Problems:    []string{"machine.network.interfaces[1]: no interface eth7 (have [eth0 eth1])"},
	}, routes: []string{"default via 10.0.2.2 dev eth0"}, err: errors.New("list routes: permission denied")}
	want := &machine.NetworkStatus{
		Links: []*machine.NetworkLink{{Name: "eth0", Addresses: []string{"10.0.2.15/24"}},
			{Name: "eth1", Addresses: []string{"10.5.0.2/24"}, Static: true}},
		Routes:      []string{"default via 10.0.2.2 dev eth0"},
		Nameservers: []string{"10.5.0.53"},
		Search:      []string{"lab.example"},
		Problems:    []string{"machine.network.interfaces[1]: no interface eth7 (have [eth0 eth1])", "list routes: permission denied"},
	}
	if diff := cmp.Diff(want, networkStatus(n), protocmp.Transform()); diff != "" {
		t.Errorf("networkStatus() (-want +got):\n%s", diff)
	}
}
