package server

import (
	"slices"
	"testing"
)

// A token advertises the port the join service really listens on, and IPv6 addresses in brackets.
func TestJoinEndpoints(t *testing.T) {
	for _, tc := range []struct {
		addrs []string
		port  int
		want  []string
	}{
		{[]string{"10.5.0.2"}, 0, []string{"10.5.0.2:50001"}},
		{[]string{"10.5.0.2", "fd00::2"}, 50101, []string{"10.5.0.2:50101", "[fd00::2]:50101"}},
		{nil, 50001, nil},
	} {
		if got := joinEndpoints(tc.addrs, tc.port); !slices.Equal(got, tc.want) {
			t.Errorf("joinEndpoints(%q, %d) = %q, want %q", tc.addrs, tc.port, got, tc.want)
		}
	}
}
