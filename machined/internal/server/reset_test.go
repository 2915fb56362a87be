package server

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/machine"
)

func TestResetWipe(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *machine.ResetRequest
		want []string
		err  string
	}{
		{"default", &machine.ResetRequest{Graceful: true}, []string{"state", "ephemeral"}, ""},
		{"all", &machine.ResetRequest{Graceful: true, Wipe: []string{"all"}}, []string{"state", "ephemeral", "etcd"}, ""},
		{"not a volume", &machine.ResetRequest{Wipe: []string{"state", "boot"}}, nil, `wipe[1]: "boot"`},
		// Leaving the cluster but keeping the lock would boot a member the cluster no longer has.
		{"graceful without state", &machine.ResetRequest{Graceful: true, Wipe: []string{"ephemeral"}}, nil, "must wipe state"},
		{"not graceful, state kept", &machine.ResetRequest{Wipe: []string{"ephemeral"}}, []string{"ephemeral"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resetWipe(tc.req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("resetWipe() error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("resetWipe() = %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("resetWipe() (-want +got):\n%s", diff)
			}
		})
	}
}
