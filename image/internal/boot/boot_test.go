package boot

import (
	"debug/pe"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUKILayout(t *testing.T) {
	got := ukiLayout(0x19134, []int64{100, 20, 8_000_000, 0x10000})
	want := []uint64{0x20000, 0x30000, 0x40000, 0x7f0000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ukiLayout() (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i]%0x10000 != 0 {
			t.Errorf("section %d at %#x is not 64 KiB aligned", i, got[i])
		}
	}
}

func TestESPSize(t *testing.T) {
	for uki, want := range map[int64]int64{1 * mib: 64 * mib, 100 * mib: 240 * mib, 20 * mib: 80 * mib} {
		if got := ESPSize(uki); got != want {
			t.Errorf("ESPSize(%d MiB) = %d MiB, want %d MiB", uki/mib, got/mib, want/mib)
		}
	}
}

func TestGUIDIsStableAndDistinct(t *testing.T) {
	a, b := guid("cairn v1 1700000000 disk"), guid("cairn v1 1700000000 esp")
	if a != guid("cairn v1 1700000000 disk") {
		t.Errorf("guid() changed between calls")
	}
	if a == b {
		t.Errorf("guid() gave the disk and the ESP the same GUID %s", a)
	}
	if len(a) != 36 || a[14] != '4' {
		t.Errorf("guid() = %s, want a 36-character version-4 GUID", a)
	}
}

// The PE checksum must match what the toolchain stored in systemd's stub, or firmware that checks it
// would refuse our UKI.
func TestPEChecksumMatchesStub(t *testing.T) {
	b, err := os.ReadFile(Stub)
	if err != nil {
		t.Skipf("no EFI stub: %v", err)
	}
	pe := int(binary.LittleEndian.Uint32(b[0x3C:]))
	stored := binary.LittleEndian.Uint32(b[pe+88:])
	if stored == 0 {
		t.Skip("stub carries no checksum")
	}
	binary.LittleEndian.PutUint32(b[pe+88:], 0)
	if got := peChecksum(b); got != stored {
		t.Errorf("peChecksum(stub) = %#x, want the stored %#x", got, stored)
	}
}

func TestSetPETimestamp(t *testing.T) {
	src, err := os.ReadFile(Stub)
	if err != nil {
		t.Skipf("no EFI stub: %v", err)
	}
	p := filepath.Join(t.TempDir(), "x.efi")
	if err := os.WriteFile(p, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setPETimestamp(p, 1700000000); err != nil {
		t.Fatal(err)
	}
	f, err := pe.Open(p)
	if err != nil {
		t.Fatalf("patched image no longer parses: %v", err)
	}
	defer f.Close()
	if f.FileHeader.TimeDateStamp != 1700000000 {
		t.Errorf("TimeDateStamp = %d, want 1700000000", f.FileHeader.TimeDateStamp)
	}
}

func TestIsFAT1x(t *testing.T) {
	s := make([]byte, 512)
	s[510], s[511], s[0x26] = 0x55, 0xAA, 0x29
	copy(s[0x36:], "FAT12   ")
	if !isFAT1x(s) {
		t.Errorf("isFAT1x(FAT12 boot sector) = false")
	}
	copy(s[0x36:], "NOTFAT  ")
	if isFAT1x(s) {
		t.Errorf("isFAT1x(other sector) = true")
	}
}

func TestGrubCfgBootsAtOnceWithCmdline(t *testing.T) {
	want := `serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
menuentry "Cairn" {
	linux /boot/vmlinuz console=ttyS0
	initrd /boot/initramfs.cpio.zst
}
`
	if diff := cmp.Diff(want, grubCfg("console=ttyS0")); diff != "" {
		t.Errorf("grubCfg() (-want +got):\n%s", diff)
	}
}
