// Package payload builds the Kubernetes payload (api/payload describes its layout) from the bundle: the
// host binaries and CNI plugins as they are, and every image of the bundle's images.tar with its layers
// unpacked once, so a node registers its images with containerd at boot instead of importing them. The
// tree is kept as a directory (sandbox mode runs from it) and packed into a zstd-compressed squashfs with
// a dm-verity hash tree after it, whose root hash the boot part records, and again uncompressed for the
// raw disk (Config.Plain).
package payload

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/upgrade"
)

// HostBinaries are the bundle's programs that run on the node itself; the others (kube, etcd, ...) run
// inside the images, which carry them.
var HostBinaries = []string{"containerd", "containerd-shim-runc-v2", "runc"}

// Config are the inputs and outputs of Build.
type Config struct {
	Bundle string // _out/bundle: bin/, cni/, images.tar, stamp
	Dir    string // the payload tree, _out/payload
	Image  string // the packed payload, _out/payload.squashfs
	// Plain is the same tree packed with nothing compressed, for the raw disk's slot: the raw disk is
	// downloaded compressed whole, so one stream with a long window shares the Go binaries' common code
	// across the payload, which a squashfs compressing each 1 MiB block alone cannot (docs/figures.md,
	// 2026-12-07). "" packs only Image.
	Plain string
	Epoch int64
}

// formatVersion changes whenever the tree or packing changes, so an old payload is rebuilt.
const formatVersion = "cairn-payload-1"

// mksquashfsArgs pack the payload: zstd at level 19 with 1 MiB blocks. Every process a node starts
// (containerd, etcd, the kube binary's components, flannel) faults its pages in from here, so reading it
// is on the path to Ready. Measured on this payload (294 MiB of files): xz with the x86 filter made 68.4
// MiB and took 4.9 s of CPU to read whole natively; zstd-19 makes 77.8 MiB and reads in 0.5 s. Under TCG
// that CPU is paid ten to twenty times over, by an Init that also starts the control plane on the same
// vCPUs. Level 22 made the same image.
var mksquashfsArgs = []string{"-comp", "zstd", "-Xcompression-level", "19", "-b", "1M"}

// plainArgs pack Config.Plain: no inode, data, fragment or xattr compression. A node reads it through
// dm-verity as it reads the compressed one; measured on 2026-12-07 (three Inits against two), hashing
// 3.6 times the bytes made apiserver-ready no later than decoding zstd did.
var plainArgs = []string{"-noI", "-noD", "-noF", "-noX", "-b", "1M"}

// Stage makes the payload tree in Dir from the bundle, unless the stamp beside it says it is made from
// the same bundle already.
func Stage(c Config, logf func(string, ...any)) error {
	inputs, err := inputHash(c.Bundle)
	if err != nil {
		return err
	}
	stamp := c.Dir + ".stamp"
	if old, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(old)) == inputs && dirExists(c.Dir) {
		logf("[payload] tree up to date (%s)", inputs[:12])
		return nil
	}
	for _, p := range []string{stamp, c.Dir} {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if err := stage(c, logf); err != nil {
		return err
	}
	return os.WriteFile(stamp, []byte(inputs+"\n"), 0o644)
}

// Pack packs the tree (Stage first) into Image, and into Plain unless it is "", each with its dm-verity
// tree appended (verity.go) unless it was packed from the same tree, and returns what the root image
// records for them: Image's record first.
func Pack(ctx context.Context, c Config, logf func(string, ...any)) (payload.Records, error) {
	if err := Stage(c, logf); err != nil {
		return nil, err
	}
	tree, err := os.ReadFile(c.Dir + ".stamp")
	if err != nil {
		return nil, err
	}
	rec, err := pack(ctx, c, c.Image, "zstd; a minute or two", mksquashfsArgs, tree, logf)
	if err != nil || c.Plain == "" {
		return payload.Records{rec}, err
	}
	// The largest file last, for the ISO's stream of this image (stream.go).
	sortFile := c.Plain + ".sort"
	if err := largestLast(c.Dir, sortFile); err != nil {
		return nil, err
	}
	defer os.Remove(sortFile)
	plain, err := pack(ctx, c, c.Plain, "uncompressed, for the raw disk and the ISO's stream", slices.Concat(plainArgs, []string{"-sort", sortFile}),
		slices.Concat(tree, []byte("largest file last\n")), logf)
	return payload.Records{rec, plain}, err
}

// pack packs the tree into image with args, unless the stamp beside it says it was packed as stamped (the
// tree's stamp, and what else changes the packing).
func pack(ctx context.Context, c Config, image, what string, args []string, stamped []byte, logf func(string, ...any)) (payload.Record, error) {
	stamp := image + ".stamp"
	if old, err := os.ReadFile(stamp); err == nil && string(old) == string(stamped) {
		if rec, err := ReadRecord(image); err == nil {
			logf("[payload] %s up to date", filepath.Base(image))
			return rec, nil
		}
	}
	for _, p := range []string{stamp, image} {
		if err := os.RemoveAll(p); err != nil {
			return payload.Record{}, err
		}
	}
	logf("[payload] packing %s (%s)", image, what)
	e := strconv.FormatInt(c.Epoch, 10)
	args = append([]string{c.Dir, image, "-noappend", "-reproducible", "-exit-on-error",
		"-mkfs-time", e, "-all-time", e, "-quiet", "-no-progress"}, args...)
	if out, err := exec.CommandContext(ctx, "mksquashfs", args...).CombinedOutput(); err != nil {
		return payload.Record{}, fmt.Errorf("mksquashfs %s: %w: %s", image, err, out)
	}
	sum, err := upgrade.FileSum(image)
	if err != nil {
		return payload.Record{}, err
	}
	if _, err := appendVerity(ctx, image, sum.SHA256); err != nil {
		return payload.Record{}, err
	}
	rec, err := ReadRecord(image)
	if err != nil {
		return payload.Record{}, err
	}
	return rec, os.WriteFile(stamp, stamped, 0o644)
}

// ReadRecord is what the root image records for a payload image made by Pack: the file's SHA-256 and
// size, and the root hash of the dm-verity tree it carries.
func ReadRecord(image string) (payload.Record, error) {
	sum, err := upgrade.FileSum(image)
	if err != nil {
		return payload.Record{}, err
	}
	f, err := os.Open(image)
	if err != nil {
		return payload.Record{}, err
	}
	defer f.Close()
	v, err := payload.ReadVerity(f)
	if err != nil {
		return payload.Record{}, fmt.Errorf("payload image %s: %w", image, err)
	}
	return payload.Record{Sum: sum, Verity: v}, nil
}

// stage lays out the payload tree in c.Dir.
func stage(c Config, logf func(string, ...any)) error {
	for _, d := range []string{payload.BinDir, payload.CNIDir, payload.BlobsDir, payload.LayersDir} {
		if err := os.MkdirAll(filepath.Join(c.Dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, b := range HostBinaries {
		src, dst := filepath.Join(c.Bundle, "bin", b), filepath.Join(c.Dir, payload.BinDir, b)
		// A multi-call binary's other names are links to it in the bundle, and stay links.
		if target, err := os.Readlink(src); err == nil {
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			continue
		}
		if err := copyFile(dst, src, 0o755); err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
	}
	plugins, err := os.ReadDir(filepath.Join(c.Bundle, "cni"))
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	for _, p := range plugins {
		if p.Type().IsRegular() {
			if err := copyFile(filepath.Join(c.Dir, payload.CNIDir, p.Name()), filepath.Join(c.Bundle, "cni", p.Name()), 0o755); err != nil {
				return err
			}
		}
	}
	// The OCI layout is read from a scratch copy: layers are looked up by digest, not in tar order.
	scratch, err := os.MkdirTemp(filepath.Dir(c.Dir), ".payload-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := untarFlat(filepath.Join(c.Bundle, "images.tar"), scratch); err != nil {
		return err
	}
	ix, err := store(scratch, c.Dir)
	if err != nil {
		return err
	}
	logf("[payload] %d images, %s", len(ix.Images), strings.Join(ix.Names(), ", "))
	return nil
}

// store converts the OCI layout at layout into the payload's image store under dir.
func store(layout, dir string) (*payload.Index, error) {
	var index struct {
		Manifests []struct {
			payload.Descriptor
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := readJSON(filepath.Join(layout, "index.json"), &index); err != nil {
		return nil, err
	}
	blob := func(digest string) string {
		h, _ := payload.Hex(digest)
		return filepath.Join(layout, "blobs", "sha256", h)
	}
	var ix payload.Index
	for _, m := range index.Manifests {
		name := m.Annotations["io.containerd.image.name"]
		if name == "" {
			return nil, fmt.Errorf("images.tar: manifest %s has no image name", m.Digest)
		}
		if _, err := payload.Hex(m.Digest); err != nil {
			return nil, fmt.Errorf("images.tar: %s: %w", name, err)
		}
		var manifest struct {
			Config payload.Descriptor   `json:"config"`
			Layers []payload.Descriptor `json:"layers"`
		}
		if err := readJSON(blob(m.Digest), &manifest); err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		if _, err := payload.Hex(manifest.Config.Digest); err != nil {
			return nil, fmt.Errorf("image %s: config: %w", name, err)
		}
		var config struct {
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
		if err := readJSON(blob(manifest.Config.Digest), &config); err != nil {
			return nil, fmt.Errorf("image %s: %w", name, err)
		}
		if len(config.RootFS.DiffIDs) != len(manifest.Layers) {
			return nil, fmt.Errorf("image %s: %d layers but %d diff IDs", name, len(manifest.Layers), len(config.RootFS.DiffIDs))
		}
		for _, d := range []string{m.Digest, manifest.Config.Digest} {
			h, _ := payload.Hex(d)
			if err := copyFile(filepath.Join(dir, payload.BlobsDir, h), blob(d), 0o644); err != nil && !os.IsExist(err) {
				return nil, err
			}
		}
		for i, l := range manifest.Layers {
			diffID := config.RootFS.DiffIDs[i]
			h, err := payload.Hex(diffID)
			if err != nil {
				return nil, fmt.Errorf("image %s: layer %d: %w", name, i, err)
			}
			ldir := filepath.Join(dir, payload.LayersDir, h)
			if dirExists(ldir) {
				continue // a layer several images share is unpacked once
			}
			if _, err := payload.Hex(l.Digest); err != nil {
				return nil, fmt.Errorf("image %s: layer %d: %w", name, i, err)
			}
			f, err := os.Open(blob(l.Digest))
			if err != nil {
				return nil, fmt.Errorf("image %s: %w", name, err)
			}
			err = extractLayer(f, diffID, ldir)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("image %s: %w", name, err)
			}
		}
		ix.Images = append(ix.Images, payload.Image{Name: name, Manifest: m.Descriptor, Config: manifest.Config, Layers: config.RootFS.DiffIDs})
	}
	sort.Slice(ix.Images, func(i, j int) bool { return ix.Images[i].Name < ix.Images[j].Name })
	data, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return nil, err
	}
	return &ix, os.WriteFile(filepath.Join(dir, payload.IndexFile), append(data, '\n'), 0o644)
}

// untarFlat extracts the regular files and directories of an OCI layout tar (no links, no owners).
func untarFlat(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		rel, err := cleanName(hdr.Name)
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		p := filepath.Join(dir, rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = writeFile(p, tr, hdr)
			}
		default:
			err = fmt.Errorf("unexpected entry %s in an OCI layout", hdr.Name)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
	}
}

// inputHash names what the payload is built from: the bundle's stamp (a hash of all its inputs) and
// this package's format.
func inputHash(bundle string) (string, error) {
	st, err := os.ReadFile(filepath.Join(bundle, "stamp"))
	if err != nil {
		return "", fmt.Errorf("bundle: %w (build it first: make bundle)", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", formatVersion, strings.Join(mksquashfsArgs, " "), st)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

func copyFile(dst, src string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
