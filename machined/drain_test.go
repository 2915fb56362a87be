package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type recordingSystem struct{ calls *[]string }

func (r recordingSystem) Reboot() error   { *r.calls = append(*r.calls, "reboot"); return nil }
func (r recordingSystem) PowerOff() error { *r.calls = append(*r.calls, "poweroff"); return nil }

func TestDrainFirstStopsTheAPIBeforeThePowerAction(t *testing.T) {
	var calls []string
	d := drainFirst{System: recordingSystem{&calls}, drain: func(wait time.Duration) {
		if wait != apiDrainWait {
			t.Errorf("drain(%v), want drain(%v)", wait, apiDrainWait)
		}
		calls = append(calls, "drain")
	}}
	if err := d.Reboot(); err != nil {
		t.Fatal(err)
	}
	if err := d.PowerOff(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"drain", "reboot", "drain", "poweroff"}, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
