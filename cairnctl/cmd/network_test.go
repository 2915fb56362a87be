package cmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/machine"
)

func TestPrintNetwork(t *testing.T) {
	var b strings.Builder
	err := printNetwork(&b, "", &machine.NetworkStatus{
		Links: []*machine.NetworkLink{{Name: "eth0", Addresses: []string{"10.0.2.15/24"}},
			{Name: "eth1", Addresses: []string{"10.5.0.2/24", "10.6.0.2/24"}, Static: true}},
		Routes:      []string{"10.99.0.0/16 via 10.5.0.1 dev eth1 metric 30", "default via 10.0.2.2 dev eth0"},
		Nameservers: []string{"10.5.0.53"},
		Problems:    []string{"machine.network.interfaces[2]: no interface eth7 (have [eth0 eth1])"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `INTERFACE  ADDRESSES                 FROM
eth0       10.0.2.15/24              dhcp
eth1       10.5.0.2/24, 10.6.0.2/24  static
routes:
  10.99.0.0/16 via 10.5.0.1 dev eth1 metric 30
  default via 10.0.2.2 dev eth0
nameservers:
  10.5.0.53
not applied:
  machine.network.interfaces[2]: no interface eth7 (have [eth0 eth1])
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printNetwork() (-want +got):\n%s", diff)
	}
}

func TestClockLine(t *testing.T) {
	tests := []struct {
		c    *machine.ClockStatus
		want string
	}{
		{nil, ""},
		{&machine.ClockStatus{Servers: []string{"a", "b"}, LastError: "a: timeout"}, "not synced: no answer from a, b (a: timeout)"},
		{&machine.ClockStatus{Servers: []string{"a"}, Synced: true, Server: "a", OffsetNs: -2_500_000_000, Steps: 1},
			"synced from a, offset -2.5s; stepped 1 time(s)"},
	}
	for _, tc := range tests {
		if got := clockLine(tc.c); got != tc.want {
			t.Errorf("clockLine(%v) = %q, want %q", tc.c, got, tc.want)
		}
	}
}
