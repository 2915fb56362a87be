package initramfs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/cairn-os/cairn/image/internal/tree"
)

func TestWriteIsReproducibleZstdCPIO(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skipf("no zstd command (make image installs it): %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, bytes.Repeat([]byte("cairn"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := tree.New()
	for _, err := range []error{
		tr.Copy("/init", src, 0o755),
		tr.Link("/sbin", "usr/sbin"),
		tr.Add(tree.Entry{Path: "/dev/console", Kind: tree.CharDev, Perm: 0o600, Dev: [2]uint32{5, 1}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var outs [2][]byte
	for i := range outs {
		p := filepath.Join(dir, "out.cpio.zst")
		if err := Write(context.Background(), p, tr, 1700000000); err != nil {
			t.Fatalf("Write() = %v", err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = b
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("Write() twice gave different bytes")
	}
	got := listZstd(t, outs[0])
	want := "0040755 0/0        0 1700000000 .\n" +
		"0040755 0/0        0 1700000000 dev\n" +
		"0020600 0/0        0 1700000000 dev/console dev 5,1\n" +
		"0100755 0/0     5000 1700000000 init\n" +
		"0120777 0/0        8 1700000000 sbin -> usr/sbin\n"
	if got != want {
		t.Errorf("List(Write()) =\n%s\nwant\n%s", got, want)
	}
}

// The stored images come first, as a plain archive the kernel copies without decompressing, and the rest
// follows in zstd: each archive lists only its own entries.
func TestWriteStoresImagesUncompressed(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skipf("no zstd command (make image installs it): %v", err)
	}
	dir := t.TempDir()
	tr := tree.New()
	for _, err := range []error{
		tr.Bytes("/init", []byte("init"), 0o755),
		tr.Bytes("/root.squashfs", bytes.Repeat([]byte("image"), 100), 0o644),
		tr.Bytes("/lib/modules/loop.ko", []byte("module"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "out.cpio.zst")
	if err := Write(context.Background(), p, tr, 1700000000, "/root.squashfs"); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	frame := bytes.Index(b, []byte{0x28, 0xb5, 0x2f, 0xfd}) // zstd's magic number
	if frame < 0 {
		t.Fatalf("Write() wrote no zstd frame")
	}
	plain, err := List(b[:frame])
	if err != nil {
		t.Fatal(err)
	}
	if want := "0100644 0/0      500 1700000000 root.squashfs\n"; plain != want {
		t.Errorf("the plain archive lists\n%s\nwant\n%s", plain, want)
	}
	packed := listZstd(t, b[frame:])
	want := "0040755 0/0        0 1700000000 .\n" +
		"0100755 0/0        4 1700000000 init\n" +
		"0040755 0/0        0 1700000000 lib\n" +
		"0040755 0/0        0 1700000000 lib/modules\n" +
		"0100644 0/0        6 1700000000 lib/modules/loop.ko\n"
	if packed != want {
		t.Errorf("the zstd archive lists\n%s\nwant\n%s", packed, want)
	}
}

func TestWriteRefusesWhatCannotBeStored(t *testing.T) {
	tr := tree.New()
	if err := tr.Bytes("/lib/modules/loop.ko", []byte("module"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, stored := range []string{"/lib/modules/loop.ko", "/lib", "/missing.squashfs"} {
		err := Write(context.Background(), filepath.Join(t.TempDir(), "out"), tr, 1700000000, stored)
		if err == nil || !strings.Contains(err.Error(), stored) {
			t.Errorf("Write(stored %s) = %v, want an error naming it", stored, err)
		}
	}
}

// listZstd lists the zstd-compressed cpio archive b.
func listZstd(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	raw, err := zr.DecodeAll(b, nil)
	if err != nil {
		t.Fatalf("zstd: %v", err)
	}
	got, err := List(raw)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
