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

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
	"github.com/cairn-os/cairn/machined/internal/unpack"
)

// streamOf packs the file at image as the ISO's stream is packed: its data and dm-verity superblock,
// without the tree, as one zstd frame that records its size.
func streamOf(t *testing.T, image string, rec payload.Record) string {
	t.Helper()
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:payload.StreamSize(rec)]
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	p := image + ".zst"
	if err := os.WriteFile(p, enc.EncodeAll(b, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// unpacker is a DirUnpacker into dir that counts its unpackings and unpacks in this process. It stands
// for veritysetup with the tree of the image tree holds, checking it was given that image's salt.
func unpacker(t *testing.T, dir string, decodes *int, free int64, tree string, rec payload.Record) DirUnpacker {
	return DirUnpacker{Dir: dir, Opener: inventory.OSOpener{},
		Decode: func(_ context.Context, src, dst string) error {
			*decodes++
			return unpack.File(src, dst)
		},
		Format: func(_ context.Context, image string, dataSize int64, salt, uuid string) error {
			b, err := os.ReadFile(tree)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := os.Open(tree)
			defer f.Close()
			if wantSalt, wantUUID, err := payload.ReadSalt(f, rec.Verity.DataSize); err != nil || salt != wantSalt || uuid != wantUUID || dataSize != rec.Verity.DataSize {
				t.Errorf("Format(%d, %s, %s), want %d, %s, %s (%v)", dataSize, salt, uuid, rec.Verity.DataSize, wantSalt, wantUUID, err)
			}
			out, err := os.OpenFile(image, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer out.Close()
			_, err = out.Write(b[payload.StreamSize(rec):])
			return err
		},
		Free: func(string) (int64, error) { return free, nil },
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestMountStream(t *testing.T) {
	dir := t.TempDir()
	good, rec := squashfsImage(t, dir, "plain", "this build, uncompressed", 6)
	_, compressed := squashfsImage(t, dir, "compressed", "this build", 4)
	want := payload.Records{compressed, rec}
	other, otherRec := squashfsImage(t, dir, "other", "another build", 5) // a size no record has
	iso := []inventory.Disk{{Name: "sr0", Path: "/dev/sr0", Signatures: []probe.Signature{{Type: probe.TypeISO9660, Label: "CAIRN"}}}}
	verity := fmt.Sprintf("verity /dev/loop1 cairn-payload %d", rec.Verity.DataSize)
	unpackDir := filepath.Join(dir, "var", "lib", "cairn", "payload")
	unpacked := filepath.Join(unpackDir, payload.UnpackedFile)

	for _, tc := range []struct {
		name    string
		stream  string
		unpack  bool  // the search has an Unpacker (Init, Join, the start), not the early one's
		free    int64 // bytes free for the unpacker
		before  string
		noTree  bool // veritysetup exits 0 and writes nothing
		want    []string
		decodes int
		err     string
	}{
		{name: "in maintenance: found, left packed, the medium unmounted",
			stream: streamOf(t, good, rec),
			want:   []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:    ErrUnpackLater.Error()},
		{name: "at Init: unpacked onto the volume, then checked and mounted like the ISO's file; the medium stays mounted",
			stream: streamOf(t, good, rec), unpack: true, free: 1 << 30, decodes: 1,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "losetup " + unpacked, verity, "mount /dev/loop1 /target squashfs"}},
		{name: "a later boot of the same build mounts the copy it unpacked before",
			stream: streamOf(t, good, rec), unpack: true, free: 1 << 30, before: good,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "losetup " + unpacked, verity, "mount /dev/loop1 /target squashfs"}},
		{name: "a copy of another build's payload is unpacked over",
			stream: streamOf(t, good, rec), unpack: true, free: 1 << 30, before: other, decodes: 1,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "losetup " + unpacked, verity, "mount /dev/loop1 /target squashfs"}},
		{name: "a stream of another build is refused by its header, before anything is unpacked",
			stream: streamOf(t, other, otherRec), unpack: true, free: 1 << 30,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:  "holds a stream of another build's payload (24576 bytes unpacked)"},
		{name: "a volume without room for it says how much it needs; the medium is unmounted again",
			stream: streamOf(t, good, rec), unpack: true, free: 1 << 10,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:  "unpacking the ISO's payload needs 0 MiB free in " + unpackDir + ", and it has 0 MiB"},
		{name: "a tree that does not come out as recorded is an error, and leaves no file behind",
			stream: streamOf(t, good, rec), unpack: true, free: 1 << 30, decodes: 1, noTree: true,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:  fmt.Sprintf("with its dm-verity tree it is %d bytes, the record says %d", payload.StreamSize(rec), rec.Size)},
		{name: "a stream cut short is an error, and leaves no file behind",
			stream: truncated(t, streamOf(t, good, rec)), unpack: true, free: 1 << 30, decodes: 1,
			want: []string{"mount /dev/sr0 MEDIUM iso9660", "unmount MEDIUM"},
			err:  "unpack MEDIUM/payload.squashfs.zst into " + unpacked + ".part"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.RemoveAll(unpackDir); err != nil {
				t.Fatal(err)
			}
			if tc.before != "" {
				b, err := os.ReadFile(tc.before)
				if err != nil || os.MkdirAll(unpackDir, 0o700) != nil || os.WriteFile(unpacked, b, 0o444) != nil {
					t.Fatal("copy the earlier boot's file:", err)
				}
			}
			m := &fakeMounter{t: t, isoDev: "/dev/sr0", stream: tc.stream}
			f := finder(t, m, iso)
			decodes := 0
			if tc.unpack {
				u := unpacker(t, unpackDir, &decodes, tc.free, good, rec)
				if tc.noTree {
					u.Format = func(context.Context, string, int64, string, string) error { return nil }
				}
				f.Unpacker = u
			}
			got, err := f.Mount(context.Background(), want, "/target")
			var calls []string
			for _, c := range m.calls {
				calls = append(calls, strings.ReplaceAll(c, f.MediumDir, "MEDIUM"))
			}
			if diff := cmp.Diff(tc.want, calls); diff != "" {
				t.Errorf("Mount() calls (-want +got):\n%s", diff)
			}
			if decodes != tc.decodes {
				t.Errorf("Mount() unpacked the stream %d times, want %d", decodes, tc.decodes)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), f.MediumDir, "MEDIUM"), tc.err) {
					t.Fatalf("Mount() = %v, want an error containing %q", err, tc.err)
				}
				if _, err := os.Stat(unpacked + ".part"); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a failed unpack left %s.part behind (%v)", unpacked, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Mount() = %v, want nil", err)
			}
			wantM := Mounted{What: "/dev/sr0 (the ISO 9660 medium CAIRN)", Loop: "/dev/loop1", Unpacked: unpacked}
			if diff := cmp.Diff(wantM, got); diff != "" {
				t.Errorf("Mount() mounted (-want +got):\n%s", diff)
			}
			a, _ := os.ReadFile(good)
			b, _ := os.ReadFile(unpacked)
			if string(a) != string(b) {
				t.Errorf("%s is not the image the stream was packed from", unpacked)
			}
		})
	}
}

func truncated(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := file + "-short"
	if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Before a reboot or a wipe, only a payload unpacked onto a volume is let go of: unmounted, its
// dm-verity device closed, its loop device freed. One on its own medium holds nothing of a volume.
func TestRelease(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Mounted
		want []string
	}{
		{name: "unpacked onto EPHEMERAL",
			m:    Mounted{What: "/dev/sr0", Loop: "/dev/loop1", Unpacked: "/var/lib/cairn/payload/payload.squashfs"},
			want: []string{"unmount /target", "verity close cairn-payload", "losetup -d /dev/loop1"}},
		{name: "the ISO's own image file", m: Mounted{What: "/dev/sr0", Loop: "/dev/loop1"}},
		{name: "a slot partition", m: Mounted{What: "/dev/vda2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeMounter{t: t}
			f := finder(t, m, nil)
			f.DetachLoop = func(dev string) error { m.calls = append(m.calls, "losetup -d "+dev); return nil }
			if err := f.Release(context.Background(), tc.m, "/target"); err != nil {
				t.Fatalf("Release() = %v", err)
			}
			if diff := cmp.Diff(tc.want, m.calls); diff != "" {
				t.Errorf("Release() calls (-want +got):\n%s", diff)
			}
		})
	}
}
