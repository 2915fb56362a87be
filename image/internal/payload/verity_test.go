package payload

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/upgrade"
)

// needTools skips a test when the image build's tools are not installed (hack/deps.sh image has them).
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (hack/deps.sh image)", tool)
		}
	}
}

// squashfs packs a small tree as Pack does and returns the image's path.
func squashfs(t *testing.T, dir string) string {
	t.Helper()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	// 1.2 MB that does not compress: about 300 data blocks, a tree of two levels.
	noise := make([]byte, 1200_000)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(noise)
	if err := os.WriteFile(filepath.Join(tree, "kube"), noise, 0o755); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "payload.squashfs")
	args := append([]string{tree, img, "-noappend", "-reproducible", "-mkfs-time", "0", "-all-time", "0", "-quiet", "-no-progress"}, mksquashfsArgs...)
	if out, err := exec.Command("mksquashfs", args...).CombinedOutput(); err != nil {
		t.Fatalf("mksquashfs: %v: %s", err, out)
	}
	return img
}

// The tree appended is veritysetup's own, its root is what the node computes from the image, and the
// same image always gets the same tree.
func TestAppendVerity(t *testing.T) {
	needTools(t, "mksquashfs", "veritysetup")
	dir := t.TempDir()
	img := squashfs(t, dir)
	before, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := upgrade.FileSum(img)
	if err != nil {
		t.Fatal(err)
	}
	v, err := appendVerity(t.Context(), img, sum.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if v.DataSize != int64(len(before)) || !bytes.Equal(after[:len(before)], before) {
		t.Fatalf("appendVerity changed the squashfs image, or DataSize %d is not its %d bytes", v.DataSize, len(before))
	}
	// veritysetup checks the whole image against the root in user space, as dm-verity does block by block.
	verify := func(file string) error {
		out, err := exec.Command("veritysetup", "verify", file, file, v.RootHash, "--hash-offset="+strconv.FormatInt(v.DataSize, 10)).CombinedOutput()
		if err != nil {
			return &exec.ExitError{Stderr: out}
		}
		return nil
	}
	if err := verify(img); err != nil {
		t.Errorf("veritysetup verify with the root appendVerity returned: %s", err.(*exec.ExitError).Stderr)
	}
	damaged := filepath.Join(dir, "damaged")
	bad := bytes.Clone(after)
	bad[len(before)/2] ^= 0xff
	if err := os.WriteFile(damaged, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := verify(damaged); err == nil {
		t.Error("veritysetup verify passed an image with a changed data block")
	}
	// The same squashfs image again: the same tree, byte for byte (make repro-check compares images).
	if err := os.WriteFile(img, before, 0o644); err != nil {
		t.Fatal(err)
	}
	v2, err := appendVerity(t.Context(), img, sum.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if v2 != v || !bytes.Equal(again, after) {
		t.Errorf("a second appendVerity of the same image made another tree (root %s, then %s)", v.RootHash, v2.RootHash)
	}
}

// The raw disk's packing holds the files as they are (so the disk's download, compressed whole, can share
// what they have in common), with a tree of its own; each packing is made again only for another tree.
func TestPackPlain(t *testing.T) {
	needTools(t, "mksquashfs", "veritysetup")
	dir := t.TempDir()
	c := Config{Dir: filepath.Join(dir, "tree"), Epoch: 1700000000}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := bytes.Repeat([]byte("the same Go runtime in every binary. "), 20000)
	if err := os.WriteFile(filepath.Join(c.Dir, "kube"), text, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	packed, plain := filepath.Join(dir, "payload.squashfs"), filepath.Join(dir, "payload-plain.squashfs")
	rec, err := pack(t.Context(), c, packed, "zstd", mksquashfsArgs, []byte("tree 1"), logf)
	if err != nil {
		t.Fatal(err)
	}
	prec, err := pack(t.Context(), c, plain, "uncompressed", plainArgs, []byte("tree 1"), logf)
	if err != nil {
		t.Fatal(err)
	}
	if prec.Verity == rec.Verity || prec.SHA256 == rec.SHA256 {
		t.Errorf("the two packings have the same record %v", rec)
	}
	for _, tc := range []struct {
		image    string
		verbatim bool
	}{{packed, false}, {plain, true}} {
		b, err := os.ReadFile(tc.image)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, text[:4096]); got != tc.verbatim {
			t.Errorf("%s holds the file's bytes as they are: %v, want %v", filepath.Base(tc.image), got, tc.verbatim)
		}
	}
	logs = nil
	if again, err := pack(t.Context(), c, plain, "uncompressed", plainArgs, []byte("tree 1"), logf); err != nil || again != prec {
		t.Errorf("pack of the same tree again = %v, %v; want %v", again, err, prec)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "up to date") {
		t.Errorf("pack of the same tree again logged %q, want it up to date", logs)
	}
}
