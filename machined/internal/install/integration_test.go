//go:build integration

package install

// A root integration test: a real loop device, the real mkfs.fat, the real partition table and payload
// written through the devices. The ESP is filled with mtools rather than mounted, so the test runs on
// kernels without vfat (the end-to-end test mounts it for real on the node).

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/slots"
)

const realStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

func need(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices")
	}
	for _, tool := range []string{"losetup", "mkfs.fat", "mcopy", "mtype"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CAIRN_REQUIRE_TOOLS") == "1" {
				t.Fatalf("tool %s is required (CAIRN_REQUIRE_TOOLS=1) but not found", tool)
			}
			t.Skipf("tool %s not found", tool)
		}
	}
	if _, err := os.Stat(realStub); err != nil {
		t.Skipf("systemd's EFI stub: %v (package systemd-boot-efi)", err)
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	// mtools checks a FAT's geometry against the device's, which a loop device has none of.
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// liveMedium lays out what the ISO carries, with small stand-ins for the kernel, initramfs and payload.
func liveMedium(t *testing.T) (Source, []byte) {
	dir := t.TempDir()
	pay := make([]byte, 3<<20+512)
	rand.Read(pay)
	files := map[string][]byte{
		upgrade.ISOKernel: []byte("a kernel"), upgrade.ISOInitramfs: []byte("an initramfs"),
		upgrade.ISOCmdline: []byte("console=ttyS0 panic=10"), upgrade.ISOSystemdBoot: []byte("systemd-boot"),
		payload.ISOFile: pay,
	}
	stub, err := os.ReadFile(realStub)
	if err != nil {
		t.Fatal(err)
	}
	files[upgrade.ISOStub] = stub
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(pay)
	return Source{Dir: dir, Version: "it-1", Payload: payload.Sum{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(pay))}}, pay
}

func newLoop(t *testing.T, size int64) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	dev := run(t, "losetup", "--find", "--show", file)
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev
}

// rangePartitions reaches a partition through a loop device over its byte range, read from the table on
// the disk: it works whether or not the kernel reads GPT.
type rangePartitions struct {
	t       *testing.T
	scanner inventory.Scanner
}

func (r rangePartitions) Device(ctx context.Context, d inventory.Disk, n int) (string, string, error) {
	cur, err := r.scanner.Disk(ctx, d.Name)
	if err != nil {
		return "", "", err
	}
	for _, p := range cur.Partitions {
		if p.Number == n {
			dev := run(r.t, "losetup", "--find", "--show", "--offset", strconv.FormatUint(p.Start, 10), "--sizelimit", strconv.FormatUint(p.Size, 10), d.Path)
			r.t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
			return dev, "", nil
		}
	}
	r.t.Fatalf("%s has no partition %d: %+v", d.Path, n, cur.Partitions)
	return "", "", nil
}

// mtoolsMounter stands in for a vfat mount: the "mounted" directory starts empty and what was written
// into it is copied onto the filesystem with mcopy at unmount.
type mtoolsMounter struct {
	t      *testing.T
	source map[string]string
}

func (m *mtoolsMounter) Mount(source, target, fstype string, _ uintptr, _ string) error {
	if fstype != "vfat" {
		m.t.Fatalf("mount of %s as %s, want vfat", source, fstype)
	}
	m.source[target] = source
	return nil
}

func (m *mtoolsMounter) Unmount(target string, _ bool) error {
	entries, err := os.ReadDir(target)
	if err != nil {
		return err
	}
	for _, e := range entries {
		run(m.t, "mcopy", "-s", "-i", m.source[target], filepath.Join(target, e.Name()), "::/")
	}
	return os.RemoveAll(target)
}

func TestInstallOntoLoopDisk(t *testing.T) {
	need(t)
	src, pay := liveMedium(t)
	dev := newLoop(t, 2<<30)
	scanner := inventory.Scanner{SysRoot: "/sys", DevRoot: "/dev"}
	inst := &Installer{Disks: scanner.Scan, Partitions: rangePartitions{t: t, scanner: scanner}, Runner: apply.ExecRunner{},
		Mounter: &mtoolsMounter{t: t, source: map[string]string{}}, Work: t.TempDir(),
		Mounts: func() ([]byte, error) { return os.ReadFile("/proc/self/mounts") }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var said []string
	progress := func(s string) { said = append(said, s); t.Log(s) }

	d, err := inst.Install(ctx, src, Request{Disk: config.Selector{Path: dev}}, progress)
	if err != nil {
		t.Fatalf("Install onto blank %s = %v", dev, err)
	}
	if d.Path != dev {
		t.Errorf("installed onto %s, want %s", d.Path, dev)
	}
	for _, want := range []string{"building the boot entry", "partitioning " + dev, "writing the payload", "making the EFI system partition"} {
		if !slices.ContainsFunc(said, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("the progress never said %q: %q", want, said)
		}
	}
	cur, err := scanner.Disk(ctx, filepath.Base(dev))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range cur.Partitions {
		names = append(names, p.Label)
	}
	if want := []string{upgrade.ESPLabel, "CAIRN-PAYLOAD-A", "CAIRN-PAYLOAD-B"}; strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("partitions %v, want %v", names, want)
	}
	esp, slotA := cur.Partitions[0], cur.Partitions[1]

	// Slot A holds the payload from its first byte.
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(pay))
	_, err = f.ReadAt(got, int64(slotA.Start))
	f.Close()
	if err != nil || !bytes.Equal(got, pay) {
		t.Errorf("slot A does not hold the payload (read error %v)", err)
	}

	// The ESP: systemd-boot where firmware looks, the loader's configuration, slot A's entry naming the version.
	espDev, _, err := rangePartitions{t: t, scanner: scanner}.Device(ctx, d, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, "mtype", "-i", espDev, "::/"+upgrade.LoaderPath); got != "systemd-boot" {
		t.Errorf("%s = %q, want the medium's systemd-boot", upgrade.LoaderPath, got)
	}
	if got := run(t, "mtype", "-i", espDev, "::/"+upgrade.LoaderConf); got != strings.TrimSpace(upgrade.LoaderConfText) {
		t.Errorf("%s = %q, want %q", upgrade.LoaderConf, got, upgrade.LoaderConfText)
	}
	entry := filepath.Join(t.TempDir(), "entry.efi")
	run(t, "mcopy", "-i", espDev, "::/"+upgrade.EntriesDir+"/"+upgrade.FirstEntry.FileName(), entry)
	if v, err := slots.UKIVersion(entry); err != nil || v != src.Version {
		t.Errorf("the boot entry's version = %q, %v; want %q", v, err, src.Version)
	}
	if esp.Size < uint64(upgrade.ESPSize(0)) {
		t.Errorf("ESP of %d bytes, want at least %d", esp.Size, upgrade.ESPSize(0))
	}

	// The disk is not blank any more: a second install is refused and changes nothing, unless it wipes.
	before := diskSum(t, dev)
	if _, err := inst.Install(ctx, src, Request{Disk: config.Selector{Path: dev}}, progress); err == nil ||
		!strings.Contains(err.Error(), "--wipe") {
		t.Errorf("a second Install without wipe = %v, want a refusal that suggests --wipe", err)
	}
	if diskSum(t, dev) != before {
		t.Error("the refused install changed the disk")
	}
	if _, err := inst.Install(ctx, src, Request{Disk: config.Selector{Path: dev}, Wipe: true}, progress); err != nil {
		t.Errorf("Install with wipe = %v", err)
	}
}

// diskSum hashes the first 70 MiB of a device: the partition table, the ESP and slot A's start.
func diskSum(t *testing.T, dev string) string {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, 70<<20)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
