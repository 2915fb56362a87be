package initramfs

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	zr, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	raw, err := zr.DecodeAll(outs[0], nil)
	if err != nil {
		t.Fatalf("zstd: %v", err)
	}
	got, err := List(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := "0040755 0/0        0 1700000000 .\n" +
		"0040755 0/0        0 1700000000 dev\n" +
		"0020600 0/0        0 1700000000 dev/console dev 5,1\n" +
		"0100755 0/0     5000 1700000000 init\n" +
		"0120777 0/0        8 1700000000 sbin -> usr/sbin\n"
	if got != want {
		t.Errorf("List(Write()) =\n%s\nwant\n%s", got, want)
	}
}
