package sys

import (
	"os"
	"testing"
)

func TestImageMappings(t *testing.T) {
	maps := []byte(`00400000-01322000 r-xp 00000000 08:01 123 /sbin/machined
01322000-0243d000 r--p 00f22000 08:01 123 /sbin/machined
0243d000-024db000 rw-p 0203d000 08:01 123 /sbin/machined
024db000-0452b000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 08:01 456 /usr/lib/other.so
`)
	got := imageMappings(maps, "/sbin/machined")
	want := []mapping{{0x400000, 0x1322000}, {0x1322000, 0x243d000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("imageMappings = %x, want the code and read-only data only (never the writable data): %x", got, want)
	}
}

func TestReleaseImagePages(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no procfs")
	}
	before, err := ReleaseImagePages()
	if err != nil {
		t.Fatal(err)
	}
	if before == 0 {
		t.Error("no resident file pages reported before the release")
	}
	// The test goes on running the code whose pages were just dropped: they fault back in.
	if _, err := ReleaseImagePages(); err != nil {
		t.Fatal(err)
	}
}
