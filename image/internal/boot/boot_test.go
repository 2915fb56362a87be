package boot

import (
	"bytes"
	"context"
	"debug/pe"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/upgrade"
)

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

// needStub skips a test that builds a UKI when this host lacks systemd's stub (package systemd-boot-efi).
func needStub(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(Stub); err != nil {
		t.Skipf("no %s: %v", Stub, err)
	}
}

// needTools skips a test that runs the real build tools when this host lacks one (hack/deps.sh image
// installs them all).
func needTools(t *testing.T) {
	t.Helper()
	needStub(t)
	if _, err := os.Stat(SystemdBoot); err != nil {
		t.Skipf("no %s: %v", SystemdBoot, err)
	}
	for _, tool := range []string{"sgdisk", "mformat", "mmd", "mcopy", "mdir", "mtype"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
}

// testUKIConfig is a UKI of stand-in kernel and initramfs files: BuildUKI does not look inside them.
func testUKIConfig(t *testing.T, dir string) UKIConfig {
	t.Helper()
	c := UKIConfig{
		Kernel: filepath.Join(dir, "vmlinuz"), Initramfs: filepath.Join(dir, "initramfs"), Cmdline: "console=ttyS0",
		Version: "v0.0.0-test", Out: filepath.Join(dir, "cairn.efi"), Epoch: 1700000000,
	}
	for f, content := range map[string]string{c.Kernel: "kernel bytes", c.Initramfs: "initramfs bytes"} {
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func checkOSRelease(t *testing.T, osrel string) {
	t.Helper()
	for _, line := range strings.Split(osrel, "\n") {
		if strings.HasPrefix(line, "ID=") || strings.HasPrefix(line, "IMAGE_ID=") {
			t.Errorf("os-release has %q: systemd-boot would sort the entries by VERSION instead of by name", line)
		}
	}
	for _, want := range []string{"NAME=Cairn\n", "VERSION=v0.0.0-test\n"} {
		if !strings.Contains(osrel, want) {
			t.Errorf("os-release %q lacks %q (systemd-boot needs a name and a version to list a UKI)", osrel, want)
		}
	}
}

// The .osrel section of a built UKI is what systemd-boot reads, so check it there as well; and the UKI
// carries the epoch, as its PE timestamp and its mtime, whatever time it is built at.
func TestUKIOSRelease(t *testing.T) {
	needStub(t)
	c := testUKIConfig(t, t.TempDir())
	if err := BuildUKI(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	f, err := pe.Open(c.Out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, want := range map[string]string{".cmdline": "console=ttyS0\x00", ".linux": "kernel bytes", ".initrd": "initramfs bytes"} {
		if got := section(t, f, name); got != want {
			t.Errorf("UKI section %s = %q, want %q", name, got, want)
		}
	}
	checkOSRelease(t, section(t, f, ".osrel"))
	if got := int64(f.FileHeader.TimeDateStamp); got != c.Epoch {
		t.Errorf("UKI's PE timestamp = %d, want the epoch %d", got, c.Epoch)
	}
	fi, err := os.Stat(c.Out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.ModTime().Unix(); got != c.Epoch {
		t.Errorf("UKI's mtime = %d, want the epoch %d", got, c.Epoch)
	}
	if _, err := os.Stat(c.Out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("BuildUKI left %s.tmp: %v", c.Out, err)
	}
}

// section reads a PE section's content, without the padding to the file alignment.
func section(t *testing.T, f *pe.File, name string) string {
	t.Helper()
	s := f.Section(name)
	if s == nil {
		t.Fatalf("UKI has no %s section", name)
	}
	b, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:min(len(b), int(s.VirtualSize))])
}

// The raw disk's ESP holds systemd-boot at the removable-media path, its loader.conf, and the UKI as
// the first entry; and two builds of it are the same bytes.
func TestRawESP(t *testing.T) {
	needTools(t)
	dir := t.TempDir()
	ctx := context.Background()
	uc := testUKIConfig(t, dir)
	if err := BuildUKI(ctx, uc); err != nil {
		t.Fatal(err)
	}
	disks := []string{filepath.Join(dir, "a.raw"), filepath.Join(dir, "b.raw")}
	for _, d := range disks {
		err := Raw(ctx, RawConfig{UKI: uc.Out, Version: uc.Version, Out: d, Work: filepath.Join(dir, "raw-work"), Epoch: uc.Epoch, Size: 66 * mib})
		if err != nil {
			t.Fatal(err)
		}
	}
	a, err := os.ReadFile(disks[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(disks[1])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two builds of the raw disk differ")
	}

	esp := disks[0] + "@@1M" // mtools' syntax for the file system at that offset: partition 1
	mtools := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], append([]string{"-i", esp}, args[1:]...)...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	listing := mtools("mdir", "-/", "-b", "::")
	var files []string
	for _, l := range strings.Fields(listing) {
		if !strings.HasSuffix(l, "/") {
			files = append(files, strings.TrimPrefix(l, "::/"))
		}
	}
	want := []string{"EFI/BOOT/BOOTX64.EFI", "EFI/Linux/cairn-1-a.efi", "loader/loader.conf"}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("ESP files (-want +got):\n%s\nmdir:\n%s", diff, listing)
	}
	if got := mtools("mtype", "::/"+upgrade.LoaderConf); got != upgrade.LoaderConfText {
		t.Errorf("loader.conf = %q, want %q", got, upgrade.LoaderConfText)
	}
	for p, src := range map[string]string{upgrade.LoaderPath: SystemdBoot, upgrade.EntriesDir + "/" + upgrade.FirstEntry.FileName(): uc.Out} {
		got := filepath.Join(dir, "got")
		os.Remove(got)
		mtools("mcopy", "::/"+p, got)
		if !sameContent(t, got, src) {
			t.Errorf("ESP's %s is not %s", p, src)
		}
	}
	if out, err := exec.Command("sgdisk", "-i", "1", disks[0]).CombinedOutput(); err != nil || !strings.Contains(string(out), "'"+upgrade.ESPLabel+"'") {
		t.Errorf("partition 1 is not named %s: %v: %s", upgrade.ESPLabel, err, out)
	}
}

func sameContent(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// testISO builds an ISO of a stand-in kernel and initramfs in dir.
func testISO(t *testing.T, dir string) ISOConfig {
	t.Helper()
	needStub(t)
	for _, tool := range []string{"grub-mkrescue", "xorriso", "mformat", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	c := ISOConfig{Kernel: filepath.Join(dir, "vmlinuz"), Initramfs: filepath.Join(dir, "initramfs"), Cmdline: "console=ttyS0 panic=10",
		Out: filepath.Join(dir, "cairn.iso"), Work: filepath.Join(dir, "iso-work"), Epoch: 1700000000}
	for f, content := range map[string]string{c.Kernel: "kernel bytes", c.Initramfs: "initramfs bytes"} {
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ISO(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// extract copies the ISO's file p out to dst.
func extract(t *testing.T, iso, p, dst string) error {
	t.Helper()
	os.Remove(dst)
	if out, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/"+p, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("ISO has no %s: %v: %s", p, err, out)
	}
	return nil
}

// A node booted from the ISO installs itself onto a disk from the ISO's files: they must be there,
// systemd's with their bytes and the command line as the image's, with nothing added.
func TestISOCarriesInstallFiles(t *testing.T) {
	dir := t.TempDir()
	c := testISO(t, dir)
	got := filepath.Join(dir, "got")
	if err := os.WriteFile(filepath.Join(dir, "cmdline"), []byte(c.Cmdline), 0o644); err != nil {
		t.Fatal(err)
	}
	for p, src := range map[string]string{
		upgrade.ISOKernel: c.Kernel, upgrade.ISOInitramfs: c.Initramfs, upgrade.ISOSystemdBoot: SystemdBoot,
		upgrade.ISOStub: Stub, upgrade.ISOCmdline: filepath.Join(dir, "cmdline"),
	} {
		if err := extract(t, c.Out, p, got); err != nil {
			t.Error(err)
			continue
		}
		if !sameContent(t, got, src) {
			t.Errorf("ISO's %s is not %s", p, src)
		}
	}
}

// UEFI firmware boots the ISO from efi.img, a FAT image holding GRUB's loader: it must hold the loader
// and little else (grub-mkrescue's was a 2.88 MB floppy, 2.6 MiB of it free; xorriso-efi.sh remakes it).
func TestISOEFIImageFitsItsLoader(t *testing.T) {
	dir := t.TempDir()
	c := testISO(t, dir)
	img := filepath.Join(dir, "efi.img")
	if err := extract(t, c.Out, "efi.img", img); err != nil {
		t.Fatal(err)
	}
	loader := filepath.Join(dir, "bootx64.efi")
	if out, err := exec.Command("mcopy", "-n", "-i", img, "::/efi/boot/bootx64.efi", loader).CombinedOutput(); err != nil {
		t.Fatalf("efi.img has no /efi/boot/bootx64.efi: %v: %s", err, out)
	}
	if f, err := pe.Open(loader); err != nil {
		t.Errorf("efi.img's /efi/boot/bootx64.efi is not an EFI program: %v", err)
	} else {
		f.Close()
	}
	var size [2]int64
	for i, p := range []string{img, loader} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size[i] = fi.Size()
	}
	if spare := size[0] - size[1]; spare > 128<<10 {
		t.Errorf("efi.img is %d bytes for a %d-byte loader: %d bytes to spare, want at most 128 KiB", size[0], size[1], spare)
	}
}
