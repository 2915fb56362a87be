package server

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/netcfg"
	"github.com/cairn-os/cairn/machined/internal/timesync"
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

func TestClockStatus(t *testing.T) {
	at := time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)
	got := clockStatus(timesync.State{Servers: []string{"10.0.2.2:10123"}, Synced: true, Server: "10.0.2.2:10123",
		Offset: -1500 * time.Millisecond, LastSync: at, Steps: 1})
	want := &machine.ClockStatus{Servers: []string{"10.0.2.2:10123"}, Synced: true, Server: "10.0.2.2:10123",
		OffsetNs: -1_500_000_000, LastSync: timestamppb.New(at), Steps: 1}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("clockStatus() (-want +got):\n%s", diff)
	}
	if got := clockStatus(timesync.State{Servers: []string{"ntp.example"}, LastErr: "ntp.example: timeout"}); got.LastSync != nil || got.Synced {
		t.Errorf("clockStatus() of a clock never synced = %v", got)
	}
}
