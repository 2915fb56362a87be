package build

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/image/internal/initramfs"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

func TestInitramfsLayout(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	initBin := write("init", "#init binary#")
	root := write("rootfs.squashfs", "squashfs image bytes")
	mods := []string{"kernel/drivers/block/loop.ko", "kernel/fs/squashfs/squashfs.ko"}
	for _, m := range mods {
		write("modules/"+m, "module "+m)
	}
	tr, err := InitramfsTree(initBin, root, "6.1.0-test", filepath.Join(dir, "modules"), mods)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := initramfs.WriteCPIO(&a, tr, 1700000000); err != nil {
		t.Fatal(err)
	}
	if err := initramfs.WriteCPIO(&b, tr, 1700000000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("WriteCPIO() twice gave different archives")
	}
	listing, err := initramfs.List(a.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "initramfs.golden", listing)
}
