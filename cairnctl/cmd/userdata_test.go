package cmd

import (
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/machine"
)

// status's platform line says, in one line, where an unconfigured node looked and what came of it; a
// refusal is loud and names the sources tried.
func TestPlatformLine(t *testing.T) {
	tried := []string{"nocloud: answered"}
	for _, tc := range []struct {
		name string
		p    *machine.PlatformStatus
		want string
	}{
		{"did not look", nil, ""},
		{"looking", &machine.PlatformStatus{Searching: true}, "looking for user data"},
		{"refused", &machine.PlatformStatus{Source: "nocloud", Tried: tried, Error: "not a Cairn document"},
			"user data NOT used: not a Cairn document (tried nocloud: answered)"},
		{"nothing anywhere", &machine.PlatformStatus{Tried: []string{"nocloud: not this platform", "ec2: not this platform"}},
			"no platform gives user data (tried nocloud: not this platform; ec2: not this platform)"},
		{"no user data", &machine.PlatformStatus{Source: "gce", Tried: tried}, "gce: no user data"},
		{"joining", &machine.PlatformStatus{Source: "nocloud", Tried: tried, Action: "join 10.5.0.2:50001"}, "nocloud: user data says join 10.5.0.2:50001"},
	} {
		if got := platformLine(tc.p); got != tc.want {
			t.Errorf("%s: platformLine = %q, want %q", tc.name, got, tc.want)
		}
	}
	if strings.Contains(platformLine(&machine.PlatformStatus{Error: "x"}), "tried") {
		t.Error("a line with no sources tried lists them")
	}
}
