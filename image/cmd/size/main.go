// Command size prints what the built image is made of, piece by piece, uncompressed and compressed
// (`make size`):
//
//	go run ./image/cmd/size [-out _out] [-json FILE]
//
// The downloads (the ISO; the raw disk compressed with zstd, written to OUT/cairn.raw.zst) and their parts (the kernel; the boot part, with
// the two squashfs images inside it; the Kubernetes payload) are measured as they are. Inside the
// payload, each binary and each image layer is compressed alone as the payload packs it (zstd at level
// 19, no match farther back than its 1 MiB blocks), which estimates its share; results are cached under
// OUT/.size by content hash.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/cairn-os/cairn/api/payload"
)

// row is one piece of the image.
type row struct {
	Piece      string `json:"piece"`
	Raw        int64  `json:"raw_bytes"`
	Compressed int64  `json:"compressed_bytes"`
	Note       string `json:"note,omitempty"`
}

func main() {
	out := flag.String("out", "_out", "the build's output directory")
	jsonOut := flag.String("json", "", "also write the table as JSON to this file")
	flag.Parse()
	rows, err := measure(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "size:", err)
		os.Exit(1)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "piece\tuncompressed\tcompressed\t\t")
	for _, r := range rows {
		raw, comp := "-", "-"
		if r.Raw > 0 {
			raw = mib(r.Raw)
		}
		if r.Compressed > 0 || r.Raw == 0 {
			comp = mib(r.Compressed)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t  %s\t\n", r.Piece, raw, comp, r.Note)
	}
	w.Flush()
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rows, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "size:", err)
			os.Exit(1)
		}
	}
}

func measure(out string) ([]row, error) {
	var rows []row
	file := func(piece, name, note string) {
		if fi, err := os.Stat(filepath.Join(out, name)); err == nil {
			rows = append(rows, row{Piece: piece, Compressed: fi.Size(), Note: note})
		}
	}
	file("cairn.iso (download)", "cairn.iso", "kernel, boot part and payload, BIOS and UEFI boot loaders")
	if n, err := rawDownload(out); err == nil {
		rows = append(rows, row{Piece: "cairn.raw.zst (download)", Compressed: n, Note: "the raw disk, its payload uncompressed: zstd " + strings.Join(rawZstdArgs, " ")})
	} else if !os.IsNotExist(err) {
		return rows, err
	}
	file("  kernel", "vmlinuz", kernelNote(filepath.Join(out, "vmlinuz")))
	file("  boot part", "initramfs.cpio.zst", "the two images below as they are, then init and its modules in zstd -19")
	file("    machined image", "machined.squashfs", "machined (squashfs, LZ4: paged in fast while it starts), as the kernel unpacks it")
	file("    root image", "rootfs.squashfs", "modules, disk tools and their libraries (squashfs, zstd), as the kernel unpacks it")
	file("  payload stream", "payload-plain.squashfs.zst", "the uncompressed payload below as one zstd stream (--ultra -22 --long=27): the ISO's")
	file("  payload", "payload.squashfs", "Kubernetes: below, each piece compressed alone (zstd -19, 1 MiB window): upgrades', the GCE disk's, vmlinux boots'")
	if fi, err := os.Stat(filepath.Join(out, "payload-plain.squashfs")); err == nil {
		rows = append(rows, row{Piece: "  payload, uncompressed", Raw: fi.Size(), Note: "the same tree with nothing compressed: the raw disk's slot A, and what the ISO's stream unpacks to"})
	}
	pieces, err := payloadPieces(out)
	if err != nil {
		return rows, err
	}
	return append(rows, pieces...), nil
}

// payloadPieces sizes each binary and image layer of the payload tree.
func payloadPieces(out string) ([]row, error) {
	dir := filepath.Join(out, "payload")
	var rows []row
	for _, sub := range []string{payload.BinDir, payload.CNIDir} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			return nil, fmt.Errorf("payload tree (make image or make payload): %w", err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, sub, e.Name())
			raw, comp, err := pieceSize(out, p)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row{Piece: "    " + sub + "/" + e.Name(), Raw: raw, Compressed: comp})
		}
	}
	names, err := layerNames(dir)
	if err != nil {
		return nil, err
	}
	layers, err := os.ReadDir(filepath.Join(dir, payload.LayersDir))
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		p := filepath.Join(dir, payload.LayersDir, l.Name())
		raw, comp, err := pieceSize(out, p)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{Piece: "    layer " + l.Name()[:12], Raw: raw, Compressed: comp, Note: names[l.Name()]})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Compressed > rows[j].Compressed })
	return rows, nil
}

// layerNames labels each layer with what the bundle says it holds (its history comment) and the
// images that use it.
func layerNames(dir string) (map[string]string, error) {
	ix, err := payload.ReadIndex(dir)
	if err != nil {
		return nil, err
	}
	comments, users := map[string]string{}, map[string][]string{}
	for _, img := range ix.Images {
		h, _ := payload.Hex(img.Config.Digest)
		var cfg struct {
			History []struct {
				Comment    string `json:"comment"`
				EmptyLayer bool   `json:"empty_layer"`
			} `json:"history"`
		}
		b, err := os.ReadFile(filepath.Join(dir, payload.BlobsDir, h))
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, err
		}
		var hist []string
		for _, e := range cfg.History {
			if !e.EmptyLayer {
				hist = append(hist, e.Comment)
			}
		}
		short := img.Name[strings.LastIndex(img.Name, "/")+1:]
		for i, l := range img.Layers {
			lh, _ := payload.Hex(l)
			if i < len(hist) {
				comments[lh] = hist[i]
			}
			users[lh] = append(users[lh], strings.Split(short, ":")[0])
		}
	}
	out := map[string]string{}
	for h, c := range comments {
		out[h] = c + " (" + strings.Join(users[h], ", ") + ")"
	}
	return out, nil
}

// pieceArgs compress one piece as image/internal/payload packs it: zstd at level 19 in 1 MiB blocks,
// which a window of 1 MiB (2^20) approximates. Its name is part of the cache key, so a change of
// settings measures every piece again.
var pieceArgs = []string{"zstd", "-19", "--zstd=wlog=20", "-T1", "-c"}

// pieceSize is a file's or a directory's size and what it compresses to with pieceArgs, cached under
// OUT/.size by content.
func pieceSize(out, p string) (int64, int64, error) {
	var raw int64
	h := sha256.New()
	var files []string
	err := filepath.Walk(p, func(f string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		files = append(files, f)
		raw += fi.Size()
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	for _, f := range files {
		if err := hashFile(h, f); err != nil {
			return 0, 0, err
		}
	}
	key := strings.Join(pieceArgs[:3], "") + "-" + hex.EncodeToString(h.Sum(nil))
	cache := filepath.Join(out, ".size", key)
	if b, err := os.ReadFile(cache); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return raw, n, nil
		}
	}
	cmd := exec.Command(pieceArgs[0], pieceArgs[1:]...)
	pr, pw := io.Pipe()
	cmd.Stdin = pr
	var n countWriter
	cmd.Stdout = &n
	go func() {
		var err error
		for _, f := range files {
			if err = copyFile(pw, f); err != nil {
				break
			}
		}
		pw.CloseWithError(err)
	}()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("zstd %s: %w", p, err)
	}
	if err := os.MkdirAll(filepath.Dir(cache), 0o755); err == nil {
		_ = os.WriteFile(cache, []byte(strconv.FormatInt(int64(n), 10)), 0o644)
	}
	return raw, int64(n), nil
}

// rawZstdArgs compress the raw disk for its download. The long window (128 MiB, the most `zstd -d`
// takes without flags) reaches across the uncompressed payload's binaries, which share the Go runtime,
// gRPC, protobuf and the Kubernetes libraries; level 22 took 4 min 13 s on two cores (2026-12-07).
var rawZstdArgs = []string{"--ultra", "-22", "--long=27", "-T2"}

// rawDownload writes OUT/cairn.raw.zst, the raw disk's download, and returns its size. It is made again
// only when cairn.raw changed since (its size and modification time, kept beside it: hashing 4 GiB of
// mostly holes would take longer than comparing them).
func rawDownload(out string) (int64, error) {
	raw, zst := filepath.Join(out, "cairn.raw"), filepath.Join(out, "cairn.raw.zst")
	fi, err := os.Stat(raw)
	if err != nil {
		return 0, err
	}
	key := fmt.Sprintf("%d %d %s\n", fi.Size(), fi.ModTime().UnixNano(), strings.Join(rawZstdArgs, " "))
	if b, err := os.ReadFile(zst + ".stamp"); err == nil && string(b) == key {
		if z, err := os.Stat(zst); err == nil {
			return z.Size(), nil
		}
	}
	fmt.Fprintf(os.Stderr, "size: compressing %s into %s (zstd %s; about four minutes on two cores)\n", raw, zst, strings.Join(rawZstdArgs, " "))
	args := append(append([]string{"-q", "-f"}, rawZstdArgs...), raw, "-o", zst+".tmp")
	if b, err := exec.Command("zstd", args...).CombinedOutput(); err != nil {
		os.Remove(zst + ".tmp")
		return 0, fmt.Errorf("zstd %s: %w: %s", raw, err, b)
	}
	if err := os.Rename(zst+".tmp", zst); err != nil {
		return 0, err
	}
	z, err := os.Stat(zst)
	if err != nil {
		return 0, err
	}
	return z.Size(), os.WriteFile(zst+".stamp", []byte(key), 0o644)
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

func hashFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

func copyFile(w io.Writer, p string) error { return hashFile(w, p) }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
