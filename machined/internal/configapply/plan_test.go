package configapply

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
)

func TestDecide(t *testing.T) {
	live := config.Change{Path: "machine.kubelet.maxPods", Effect: config.Live, Why: "w"}
	reboot := config.Change{Path: "machine.hostname", Effect: config.Reboot, Why: "w"}
	immutable := config.Change{Path: "cluster.network.podCIDR", Effect: config.Immutable, Why: "the pod ranges"}
	for _, tc := range []struct {
		name    string
		changes []config.Change
		mode    Mode
		want    Plan
		refused string // a part of the refusal's message
	}{
		{name: "auto, all live", changes: []config.Change{live}, mode: Auto, want: Plan{Live: true, Store: true}},
		{name: "auto, one needs a reboot", changes: []config.Change{live, reboot}, mode: Auto, want: Plan{Store: true, RebootAfter: true}},
		{name: "no-reboot, live", changes: []config.Change{live}, mode: NoReboot, want: Plan{Live: true, Store: true}},
		{name: "no-reboot refuses a reboot", changes: []config.Change{live, reboot}, mode: NoReboot, refused: "machine.hostname"},
		{name: "reboot", changes: []config.Change{live}, mode: Reboot, want: Plan{Store: true, RebootAfter: true}},
		{name: "staged changes nothing now", changes: []config.Change{live, reboot}, mode: Staged, want: Plan{}},
		{name: "try is live and not stored", changes: []config.Change{live}, mode: Try, want: Plan{Live: true}},
		{name: "try refuses a reboot", changes: []config.Change{reboot}, mode: Try, refused: "take a reboot"},
		{name: "immutable refused in every mode", changes: []config.Change{live, immutable}, mode: Reboot, refused: "cluster.network.podCIDR (the pod ranges)"},
		{name: "immutable refused in staged", changes: []config.Change{immutable}, mode: Staged, refused: "cluster.network.podCIDR"},
		{name: "nothing changed", mode: Auto, want: Plan{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decide(tc.changes, tc.mode)
			if tc.refused != "" {
				var r *Refusal
				if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("Decide() = %v, want a refusal naming %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Mode, tc.want.Changes = tc.mode, tc.changes
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Auto, "auto": Auto, "no-reboot": NoReboot, "reboot": Reboot, "staged": Staged, "try": Try} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := ParseMode("later"); err == nil || !strings.Contains(err.Error(), "auto, no-reboot, reboot, staged, try") {
		t.Errorf("ParseMode(later) = %v, want the modes listed", err)
	}
}

func TestTouches(t *testing.T) {
	ch := []config.Change{{Path: "cluster.apiServer.extraArgs.v"}, {Path: "machine.registries.mirror.example.mirrors[0]"}}
	for prefixes, want := range map[string]bool{
		"cluster.apiServer":  true,
		"cluster.api":        false,
		"machine.registries": true,
		"machine.kubelet":    false,
	} {
		if got := Touches(ch, prefixes); got != want {
			t.Errorf("Touches(%s) = %v, want %v", prefixes, got, want)
		}
	}
}
