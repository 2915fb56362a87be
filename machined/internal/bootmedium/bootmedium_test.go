package bootmedium

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// squashfsImage is a file that passes for a squashfs image of blocks 4 KiB blocks: the magic, bytes_used
// and a body that differs with seed.
func squashfsImage(t *testing.T, dir, name, seed string, blocks int) (string, payload.Sum) {
	t.Helper()
	b := make([]byte, blocks*4096)
	copy(b, "hsqs")
	binary.LittleEndian.PutUint64(b[40:], uint64(len(b)-100)) // padded to 4 KiB by mksquashfs
	copy(b[96:], seed)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return p, payload.Sum{SHA256: hex.EncodeToString(h[:]), Size: int64(len(b))}
}

// fakeMounter records mounts; mounting the ISO device makes isoFile appear on the medium directory.
type fakeMounter struct {
	t       *testing.T
	calls   []string
	isoDev  string
	isoFile string // copied to MediumDir/payload.ISOFile when isoDev is mounted; "" for an ISO without it
}

func (m *fakeMounter) Mount(source, target, fstype string, _ uintptr, _ string) error {
	m.calls = append(m.calls, fmt.Sprintf("mount %s %s %s", source, target, fstype))
	if fstype == "iso9660" {
		if source != m.isoDev {
			return fmt.Errorf("%s: wrong fs type", source)
		}
		if m.isoFile != "" {
			b, err := os.ReadFile(m.isoFile)
			if err != nil {
				m.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(target, payload.ISOFile), b, 0o444); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	return nil
}

func (m *fakeMounter) Unmount(target string, _ bool) error {
	m.calls = append(m.calls, "unmount "+target)
	return os.RemoveAll(filepath.Join(target, payload.ISOFile))
}

func finder(t *testing.T, m *fakeMounter, scans ...[]inventory.Disk) Finder {
	n := 0
	return Finder{
		Disks: func(context.Context) ([]inventory.Disk, error) {
			d := scans[min(n, len(scans)-1)]
			n++
			return d, nil
		},
		Opener:  inventory.OSOpener{},
		Mounter: m,
		AttachLoop: func(file string) (string, error) {
			m.calls = append(m.calls, "losetup "+file)
			return "/dev/loop1", nil
		},
		MediumDir: filepath.Join(t.TempDir(), "medium"),
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func squashfsSig() []probe.Signature { return []probe.Signature{{Type: probe.TypeSquashfs}} }

func TestMount(t *testing.T) {
	dir := t.TempDir()
	good, want := squashfsImage(t, dir, "a", "this build", 4)
	other, _ := squashfsImage(t, dir, "b", "another build", 4)
	smaller, _ := squashfsImage(t, dir, "c", "this build", 2)
	if b, err := os.ReadFile(good); err != nil || os.WriteFile(good+"-copy", b, 0o644) != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk")
	if err := os.WriteFile(junk, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	rawDisk := func(a, b string) inventory.Disk {
		return inventory.Disk{Name: "vda", Path: "/dev/vda", Partitions: []inventory.Partition{
			{Number: 1, Path: "/dev/vda1", Label: "CAIRN-EFI"},
			{Number: 3, Path: b, Label: payload.PartitionLabel(payload.SlotB)},
			{Number: 2, Path: a, Label: payload.PartitionLabel(payload.SlotA)},
		}}
	}
	iso := inventory.Disk{Name: "sr0", Path: "/dev/sr0", Signatures: []probe.Signature{{Type: probe.TypeISO9660, Label: "CAIRN"}}}
	for _, tc := range []struct {
		name    string
		disks   []inventory.Disk
		booted  string // the slot that booted
		isoFile string
		want    []string // the mounts, in order
		err     string   // a substring of the error
	}{
		{name: "the raw disk: slot A is tried first and mounted",
			disks: []inventory.Disk{rawDisk(good, other)},
			want:  []string{"mount " + good + " /target squashfs"}},
		{name: "slot A holds another build: slot B, same size, is it",
			disks: []inventory.Disk{rawDisk(other, good)},
			want:  []string{"mount " + good + " /target squashfs"}},
		{name: "both slots hold this build: the booted slot's is mounted, not the one an upgrade writes",
			disks: []inventory.Disk{rawDisk(good, good+"-copy")}, booted: payload.SlotB,
			want: []string{"mount " + good + "-copy /target squashfs"}},
		{name: "vmlinux: a whole disk holding the image",
			disks: []inventory.Disk{{Name: "vdb", Path: good, Signatures: squashfsSig()}},
			want:  []string{"mount " + good + " /target squashfs"}},
		{name: "loop devices are the node's own and never tried",
			disks: []inventory.Disk{{Name: "loop0", Path: good, Signatures: squashfsSig()}},
			err:   "no boot medium carries one among 1 disks"},
		{name: "the ISO: mounted, its file checked, attached and mounted",
			disks: []inventory.Disk{iso}, isoFile: good,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "losetup MEDIUM/payload.squashfs", "mount /dev/loop1 /target squashfs"}},
		{name: "an ISO without the payload is unmounted again",
			disks: []inventory.Disk{iso},
			want:  []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:   "/dev/sr0 (the ISO 9660 medium CAIRN): has no payload.squashfs"},
		{name: "an ISO with another build's payload is unmounted again",
			disks: []inventory.Disk{iso}, isoFile: other,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:  "(the ISO 9660 medium CAIRN): has SHA-256"},
		{name: "a payload of another size is named with its size",
			disks: []inventory.Disk{{Name: "vdb", Path: smaller, Signatures: squashfsSig()}},
			err:   fmt.Sprintf("holds a squashfs image of 8192 bytes, not %d", want.Size)},
		{name: "a slot that holds no squashfs",
			disks: []inventory.Disk{rawDisk(junk, junk)},
			err:   "(partition CAIRN-PAYLOAD-A): holds no squashfs image; "},
		{name: "no medium at all says what was looked for",
			disks: []inventory.Disk{{Name: "vdb", Path: "/dev/vdb"}},
			err:   "attach payload.squashfs as a read-only disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMounter{t: t, isoDev: "/dev/sr0", isoFile: tc.isoFile}
			f := finder(t, m, tc.disks)
			f.Slot = func() string { return tc.booted }
			err := f.Mount(context.Background(), want, "/target")
			if tc.err == "" && err != nil {
				t.Fatalf("Mount() = %v, want nil", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Mount() = %v, want an error containing %q", err, tc.err)
			}
			var got []string
			for _, c := range m.calls {
				got = append(got, strings.ReplaceAll(c, f.MediumDir, "MEDIUM"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Mount() calls (-want +got):\n%s", diff)
			}
		})
	}
}

// A USB stick shows up seconds after its driver: a search that found nothing is repeated until Wait.
func TestMountWaitsForTheMedium(t *testing.T) {
	good, want := squashfsImage(t, t.TempDir(), "a", "this build", 2)
	m := &fakeMounter{t: t}
	f := finder(t, m, nil, []inventory.Disk{{Name: "sdb", Path: good, Signatures: squashfsSig()}})
	f.Wait = time.Minute
	if err := f.Mount(context.Background(), want, "/target"); err != nil {
		t.Fatalf("Mount() = %v, want nil once the disk appears", err)
	}
	f = finder(t, m, nil)
	if err := f.Mount(context.Background(), want, "/target"); err == nil {
		t.Fatal("Mount() without Wait and without a medium = nil, want an error")
	}
}

func TestReadSum(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadSum(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "carries no Kubernetes payload") {
		t.Errorf("ReadSum(missing) = %v, want the image named as one without a payload", err)
	}
	p := filepath.Join(dir, "sum")
	sum := payload.Sum{SHA256: strings.Repeat("ab", 32), Size: 4096}
	if err := os.WriteFile(p, []byte(sum.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSum(p)
	if err != nil || got != sum {
		t.Errorf("ReadSum() = %v, %v, want %v", got, err, sum)
	}
	if err := os.WriteFile(p, []byte(sum.SHA256+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSum(p); err == nil || !strings.Contains(err.Error(), `want "SHA256 SIZE"`) {
		t.Errorf("ReadSum(an old sum without a size) = %v, want the format named", err)
	}
}
