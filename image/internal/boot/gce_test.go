package boot

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The GCE tarball holds the raw disk as disk.raw, whole when unpacked, stored sparse, and is the same
// bytes when built twice.
func TestGCETarball(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar")
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "cairn.raw")
	f, err := os.Create(raw)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("cairn"), 1000)
	if _, err := f.WriteAt(data, 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out := filepath.Join(dir, "cairn-gce.tar.gz")
	if err := GCETarball(t.Context(), raw, out, 1700000000); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command("tar", "-tvzf", out).CombinedOutput()
	if err != nil || !strings.Contains(string(list), " "+GCEName+"\n") || !strings.Contains(string(list), "0/0") {
		t.Fatalf("tar -tvzf = %v\n%s\nwant one disk.raw owned by 0/0", err, list)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() > 1<<20 {
		t.Errorf("tarball size = %v, %v; want the sparse disk's data only, compressed", fi, err)
	}
	x := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", out, "-C", x).CombinedOutput(); err != nil {
		t.Fatalf("unpack: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(x, GCEName))
	if err != nil || len(got) != 64<<20 || !bytes.Equal(got[3<<20:3<<20+len(data)], data) {
		t.Fatalf("unpacked disk.raw: %d bytes, %v; want the 64 MiB disk with its data in place", len(got), err)
	}
	again := filepath.Join(dir, "again.tar.gz")
	if err := GCETarball(t.Context(), raw, again, 1700000000); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two builds of the tarball differ")
	}
}
