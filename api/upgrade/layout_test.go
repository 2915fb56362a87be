package upgrade

import "testing"

func TestESPSize(t *testing.T) {
	// Three UKIs and 32 MiB, rounded up to 16 MiB, at least 64 MiB: 28 MiB is about today's UKI.
	for uki, want := range map[int64]int64{1 * mib: 64 * mib, 100 * mib: 336 * mib, 20 * mib: 96 * mib, 28 * mib: 128 * mib} {
		if got := ESPSize(uki); got != want {
			t.Errorf("ESPSize(%d MiB) = %d MiB, want %d MiB", uki/mib, got/mib, want/mib)
		}
	}
}
