package sys

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory that already holds the knob stands in for a mounted debugfs, so nothing is mounted.
func TestFaultAroundSet(t *testing.T) {
	dir := t.TempDir()
	knob := filepath.Join(dir, faultAroundFile)
	if err := os.WriteFile(knob, []byte("65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prev, err := FaultAround{Dir: dir}.Set(4096)
	if err != nil {
		t.Fatal(err)
	}
	if prev != 65536 {
		t.Errorf("Set(4096) = %d, want the window it replaced, 65536", prev)
	}
	if got, _ := os.ReadFile(knob); string(got) != "4096" {
		t.Errorf("knob holds %q after Set(4096), want 4096", got)
	}
}

func TestFaultAroundSetRefuses(t *testing.T) {
	dir := t.TempDir()
	knob := filepath.Join(dir, faultAroundFile)
	if err := os.WriteFile(knob, []byte("65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bytes := range []int{0, 1024, 6000, 4096 * 3} {
		if _, err := (FaultAround{Dir: dir}).Set(bytes); err == nil || !strings.Contains(err.Error(), "power of two") {
			t.Errorf("Set(%d) = %v, want a refusal naming the rule", bytes, err)
		}
	}
	if got, _ := os.ReadFile(knob); string(got) != "65536\n" {
		t.Errorf("a refused Set changed the knob to %q", got)
	}
}
