package sys

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The early mount table decides what containers may do on the node: check the flags that matter.
func TestEarlyMounts(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range EarlyMounts {
		if seen[m.Target] {
			t.Errorf("%s mounted twice", m.Target)
		}
		seen[m.Target] = true
		if m.Flags&unix.MS_NOSUID == 0 {
			t.Errorf("%s is not nosuid", m.Target)
		}
	}
	for _, want := range []string{"/tmp", "/var", "/sys/fs/cgroup", "/dev/pts", "/dev/shm"} {
		if !seen[want] {
			t.Errorf("%s is not mounted early", want)
		}
	}
	for _, m := range EarlyMounts {
		switch m.Target {
		case "/sys/fs/cgroup":
			if m.FSType != "cgroup2" {
				t.Errorf("/sys/fs/cgroup is %s, want cgroup2 (kubelet on Cairn runs on the unified hierarchy)", m.FSType)
			}
		case "/tmp", "/dev/shm":
			if m.Data != "mode=1777" {
				t.Errorf("%s data %q, want world-writable sticky mode=1777", m.Target, m.Data)
			}
		}
	}
}
