package qemu

import "testing"

// TestFreePortsDistinct: every host port of one VM is its own; a repeated one makes QEMU refuse to start
// ("Could not set up host forwarding rule").
func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(64)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p == 0 || seen[p] {
			t.Fatalf("freePorts(64) = %v: port %d is zero or repeated", ports, p)
		}
		seen[p] = true
	}
}
