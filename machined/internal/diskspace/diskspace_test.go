package diskspace

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMonitor(t *testing.T) {
	used := map[string]uint64{"/var": 50, "/system/state": 10}
	var events []string
	m := &Monitor{
		Volumes: []Volume{{"STATE", "/system/state"}, {"EPHEMERAL", "/var"}, {"ETCD", "/var/lib/etcd"}},
		Usage: func(p string) (uint64, uint64, error) {
			u, ok := used[p]
			if !ok {
				return 0, 0, errors.New("not mounted")
			}
			return 100 << 20, u << 20, nil
		},
		Event: func(outcome, msg string) { events = append(events, outcome+": "+msg) },
	}
	m.Check()
	if len(m.Warnings()) != 0 || len(events) != 0 {
		t.Fatalf("half-empty volumes: warnings %v, events %v, want none", m.Warnings(), events)
	}
	used["/var"] = 100
	m.Check()
	m.Check() // still full: no second event
	want := []string{"EPHEMERAL (/var) is 100% full: 100.0 MiB of 100.0 MiB used; what writes there fails"}
	if diff := cmp.Diff(want, m.Warnings()); diff != "" {
		t.Errorf("Warnings() of a full EPHEMERAL (-want +got):\n%s", diff)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], "full: EPHEMERAL") {
		t.Errorf("events = %q, want one full event", events)
	}
	used["/var"] = 60
	m.Check()
	if len(m.Warnings()) != 0 {
		t.Errorf("Warnings() after space was freed = %v, want none", m.Warnings())
	}
	if len(events) != 2 || !strings.HasPrefix(events[1], "ok: EPHEMERAL (/var) has room again: 60% used") {
		t.Errorf("events = %q, want an ok event second", events)
	}
}
