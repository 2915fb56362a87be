package payload

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/cairn-os/cairn/api/payload"
)

// The ISO's stream: the uncompressed packing with its largest file last (so the window reaches from it
// back to every other binary), its data and dm-verity superblock without the tree, as one zstd frame that
// records the size a node unpacks; packed again only for another image. From what it unpacks to,
// veritysetup with the superblock's salt and UUID rebuilds the image byte for byte, as a node does.
func TestStream(t *testing.T) {
	needTools(t, "mksquashfs", "veritysetup", "zstd")
	dir := t.TempDir()
	c := Config{Dir: filepath.Join(dir, "tree"), Epoch: 1700000000}
	files := map[string][]byte{
		"a":    bytes.Repeat([]byte("a small binary. "), 1000),
		"kube": bytes.Repeat([]byte("the largest binary, placed last. "), 20000),
		"z":    bytes.Repeat([]byte("another binary, named after kube. "), 2000),
	}
	for name, b := range files {
		if err := os.MkdirAll(c.Dir, 0o755); err != nil || os.WriteFile(filepath.Join(c.Dir, name), b, 0o755) != nil {
			t.Fatal(err)
		}
	}
	sortFile := filepath.Join(dir, "sort")
	if err := largestLast(c.Dir, sortFile); err != nil {
		t.Fatal(err)
	}
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	plain := filepath.Join(dir, "payload-plain.squashfs")
	rec, err := pack(t.Context(), c, plain, "uncompressed", slices.Concat(plainArgs, []string{"-sort", sortFile}), []byte("tree 1"), logf)
	if err != nil {
		t.Fatal(err)
	}
	image, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	at := func(name string) int { return bytes.Index(image, files[name][:64]) }
	if at("a") < 0 || at("z") < 0 || at("kube") < max(at("a"), at("z")) {
		t.Errorf("data offsets a %d, z %d, kube %d: want the largest file, kube, after every other", at("a"), at("z"), at("kube"))
	}

	out := filepath.Join(dir, "payload-plain.squashfs.zst")
	if err := Stream(t.Context(), plain, out, rec, logf); err != nil {
		t.Fatal(err)
	}
	packed, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	n := payload.StreamSize(rec)
	var h zstd.Header
	if err := h.Decode(packed); err != nil || !h.HasFCS || int64(h.FrameContentSize) != n {
		t.Errorf("the stream's header: %+v, %v; want it to record the %d bytes of data and superblock", h, err, n)
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxWindow(1<<27))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.DecodeAll(packed, nil)
	if err != nil || !bytes.Equal(got, image[:n]) {
		t.Fatalf("the stream unpacks to %d bytes (%v), want the image's first %d", len(got), err, n)
	}
	unpacked := filepath.Join(dir, "unpacked")
	if err := os.WriteFile(unpacked, got, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	salt, uuid, err := payload.ReadSalt(f, rec.Verity.DataSize)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("veritysetup", payload.FormatArgs(unpacked, rec.Verity.DataSize, salt, uuid)...).CombinedOutput(); err != nil {
		t.Fatalf("veritysetup: %v: %s", err, b)
	}
	if rebuilt, err := os.ReadFile(unpacked); err != nil || !bytes.Equal(rebuilt, image) {
		t.Errorf("the image with its tree rebuilt (%d bytes, %v) is not the packed image (%d bytes)", len(rebuilt), err, len(image))
	}

	logs = nil
	if err := Stream(t.Context(), plain, out, rec, logf); err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "up to date") {
		t.Errorf("Stream of the same image again logged %q, want it up to date", logs)
	}
}
