package bootmedium

import (
	"context"
	"errors"
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
	"github.com/cairn-os/cairn/api/payload/payloadtest"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
	"github.com/cairn-os/cairn/machined/internal/verity"
)

// squashfsImage is a file laid out as a payload image of blocks data blocks (payloadtest), whose root
// hash differs with seed.
func squashfsImage(t *testing.T, dir, name, seed string, blocks int) (string, payload.Record) {
	t.Helper()
	b, rec := payloadtest.Image(blocks, seed)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, rec
}

// fakeVerity stands for dm-verity: it opens a device as itself, or refuses it as the kernel refuses an
// image whose first block does not match when the device is in refuse.
type fakeVerity struct {
	calls  *[]string
	refuse map[string]bool
}

func (v fakeVerity) OpenImage(_ context.Context, dev, name string, want payload.Verity) (string, error) {
	*v.calls = append(*v.calls, fmt.Sprintf("verity %s %s %d", dev, name, want.DataSize))
	if v.refuse[dev] {
		return "", fmt.Errorf("%s: %w (root hash %s): input/output error", dev, verity.ErrMismatch, want.RootHash)
	}
	return dev, nil
}

func (v fakeVerity) Close(_ context.Context, name string) error {
	*v.calls = append(*v.calls, "verity close "+name)
	return nil
}

// fakeMounter records mounts; mounting the ISO device makes isoFile appear on the medium directory.
type fakeMounter struct {
	t       *testing.T
	calls   []string
	isoDev  string
	isoFile string          // copied to MediumDir/payload.ISOFile when isoDev is mounted; "" for an ISO without it
	stream  string          // copied to MediumDir/payload.ISOStream when isoDev is mounted
	refuse  map[string]bool // devices whose first block dm-verity refuses
}

func (m *fakeMounter) Mount(source, target, fstype string, _ uintptr, _ string) error {
	m.calls = append(m.calls, fmt.Sprintf("mount %s %s %s", source, target, fstype))
	if fstype == "iso9660" {
		if source != m.isoDev {
			return fmt.Errorf("%s: wrong fs type", source)
		}
		for name, from := range map[string]string{payload.ISOFile: m.isoFile, payload.ISOStream: m.stream} {
			if from == "" {
				continue
			}
			b, err := os.ReadFile(from)
			if err != nil {
				m.t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(target, name), b, 0o444); err != nil {
				m.t.Fatal(err)
			}
		}
	}
	return nil
}

func (m *fakeMounter) Unmount(target string, _ bool) error {
	m.calls = append(m.calls, "unmount "+target)
	return errors.Join(os.RemoveAll(filepath.Join(target, payload.ISOFile)), os.RemoveAll(filepath.Join(target, payload.ISOStream)))
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
		Verity:  fakeVerity{calls: &m.calls, refuse: m.refuse},
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
	good, rec := squashfsImage(t, dir, "a", "this build", 4)
	other, otherRec := squashfsImage(t, dir, "b", "another build", 4)
	// The same build's payload packed uncompressed, as the raw disk carries it: another image, another
	// tree, recorded beside the compressed one.
	plain, plainRec := squashfsImage(t, dir, "p", "this build, uncompressed", 6)
	want := payload.Records{rec, plainRec}
	if b, err := os.ReadFile(good); err != nil || os.WriteFile(good+"-copy", b, 0o644) != nil {
		t.Fatal(err)
	}
	damaged := good + "-damaged" // the same tree, a block of data changed: only dm-verity can tell
	if b, err := os.ReadFile(good); err != nil || os.WriteFile(damaged, b, 0o644) != nil {
		t.Fatal(err)
	}
	short := good + "-short"
	if b, err := os.ReadFile(good); err != nil || os.WriteFile(short, b[:len(b)-1], 0o644) != nil {
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
	verity := func(dev string) string { return fmt.Sprintf("verity %s cairn-payload %d", dev, rec.Verity.DataSize) }
	verityPlain := func(dev string) string {
		return fmt.Sprintf("verity %s cairn-payload %d", dev, plainRec.Verity.DataSize)
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
		{name: "the raw disk: slot A is tried first and mounted through dm-verity",
			disks: []inventory.Disk{rawDisk(good, other)},
			want:  []string{verity(good), "mount " + good + " /target squashfs"}},
		{name: "the raw disk's slot A holds the uncompressed encoding: opened with its own tree",
			disks: []inventory.Disk{rawDisk(plain, other)},
			want:  []string{verityPlain(plain), "mount " + plain + " /target squashfs"}},
		{name: "an upgrade wrote the compressed encoding to slot B, which booted",
			disks: []inventory.Disk{rawDisk(plain, good)}, booted: payload.SlotB,
			want: []string{verity(good), "mount " + good + " /target squashfs"}},
		{name: "slot A holds another build: slot B, same size, is it",
			disks: []inventory.Disk{rawDisk(other, good)},
			want:  []string{verity(good), "mount " + good + " /target squashfs"}},
		{name: "both slots hold this build: the booted slot's is mounted, not the one an upgrade writes",
			disks: []inventory.Disk{rawDisk(good, good+"-copy")}, booted: payload.SlotB,
			want: []string{verity(good + "-copy"), "mount " + good + "-copy /target squashfs"}},
		{name: "vmlinux: a whole disk holding the image",
			disks: []inventory.Disk{{Name: "vdb", Path: good, Signatures: squashfsSig()}},
			want:  []string{verity(good), "mount " + good + " /target squashfs"}},
		{name: "loop devices are the node's own and never tried",
			disks: []inventory.Disk{{Name: "loop0", Path: good, Signatures: squashfsSig()}},
			err:   "no boot medium carries one among 1 disks"},
		{name: "the ISO: mounted, its file checked, attached and mounted through dm-verity",
			disks: []inventory.Disk{iso}, isoFile: good,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "losetup MEDIUM/payload.squashfs", verity("/dev/loop1"), "mount /dev/loop1 /target squashfs"}},
		{name: "an ISO without the payload is unmounted again",
			disks: []inventory.Disk{iso},
			want:  []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:   "/dev/sr0 (the ISO 9660 medium CAIRN): has neither payload.squashfs nor payload.squashfs.zst"},
		{name: "an ISO with another build's payload is unmounted again, named by its tree",
			disks: []inventory.Disk{iso}, isoFile: other,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:  "(the ISO 9660 medium CAIRN): holds another build's payload (dm-verity root hash " + otherRec.Verity.RootHash},
		{name: "a copy whose first block dm-verity refuses is not mounted; the next candidate is",
			disks: []inventory.Disk{rawDisk(damaged, good)},
			want:  []string{verity(damaged), verity(good), "mount " + good + " /target squashfs"}},
		{name: "a copy cut short",
			disks: []inventory.Disk{{Name: "vdb", Path: short, Signatures: squashfsSig()}},
			err:   fmt.Sprintf("is cut short: its last byte, at %d, cannot be read", rec.Size-1)},
		{name: "a slot that holds no squashfs",
			disks: []inventory.Disk{rawDisk(junk, junk)},
			err:   "(partition CAIRN-PAYLOAD-A): holds no Cairn payload: no squashfs image at its start; "},
		{name: "no medium at all says what was looked for",
			disks: []inventory.Disk{{Name: "vdb", Path: "/dev/vdb"}},
			err:   "attach payload.squashfs as a read-only disk"},
		{name: "a search that finds nothing names every recorded encoding",
			disks: []inventory.Disk{rawDisk(other, other)},
			err:   "(dm-verity root hash " + rec.Verity.RootHash + fmt.Sprintf(", %d bytes, or dm-verity root hash ", rec.Size) + plainRec.Verity.RootHash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMounter{t: t, isoDev: "/dev/sr0", isoFile: tc.isoFile, refuse: map[string]bool{damaged: true}}
			f := finder(t, m, tc.disks)
			f.Slot = func() string { return tc.booted }
			_, err := f.Mount(context.Background(), want, "/target")
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

// A search that ends with a refused copy names dm-verity's refusal.
func TestMountNamesARefusedCopy(t *testing.T) {
	good, want := squashfsImage(t, t.TempDir(), "a", "this build", 2)
	m := &fakeMounter{t: t, refuse: map[string]bool{good: true}}
	f := finder(t, m, []inventory.Disk{{Name: "vdb", Path: good, Signatures: squashfsSig()}})
	_, err := f.Mount(context.Background(), payload.Records{want}, "/target")
	if err == nil || !strings.Contains(err.Error(), "dm-verity refused its first block") || !strings.Contains(err.Error(), "the copy is damaged, or was changed") {
		t.Errorf("Mount() = %v, want dm-verity's refusal named", err)
	}
}

// A USB stick shows up seconds after its driver: a search that found nothing is repeated until Wait.
func TestMountWaitsForTheMedium(t *testing.T) {
	good, want := squashfsImage(t, t.TempDir(), "a", "this build", 2)
	m := &fakeMounter{t: t}
	f := finder(t, m, nil, []inventory.Disk{{Name: "sdb", Path: good, Signatures: squashfsSig()}})
	f.Wait = time.Minute
	if _, err := f.Mount(context.Background(), payload.Records{want}, "/target"); err != nil {
		t.Fatalf("Mount() = %v, want nil once the disk appears", err)
	}
	f = finder(t, m, nil)
	if _, err := f.Mount(context.Background(), payload.Records{want}, "/target"); err == nil {
		t.Fatal("Mount() without Wait and without a medium = nil, want an error")
	}
}

func TestReadRecords(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadRecords(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "carries no Kubernetes payload") {
		t.Errorf("ReadRecords(missing) = %v, want the image named as one without a payload", err)
	}
	p := filepath.Join(dir, "sum")
	_, rec := payloadtest.Image(2, "a")
	_, plain := payloadtest.Image(3, "a, uncompressed")
	want := payload.Records{rec, plain}
	if err := os.WriteFile(p, []byte(want.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRecords(p)
	if err != nil || cmp.Diff(want, got) != "" {
		t.Errorf("ReadRecords() = %v, %v, want %v", got, err, want)
	}
	if err := os.WriteFile(p, []byte(rec.Sum.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecords(p); err == nil || !strings.Contains(err.Error(), `want "SHA256 SIZE ROOTHASH DATASIZE"`) {
		t.Errorf("ReadRecords(a sum without a dm-verity root) = %v, want the format named", err)
	}
}
