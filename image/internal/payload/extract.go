package payload

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// extractLayer unpacks one image layer (a tar, gzip-compressed or not) into dir, which must not exist,
// and checks that the uncompressed stream is the layer's diff ID. Owners, modes and extended attributes
// (a file capability, say) are kept, so building needs root, like unpacking an image anywhere. Layers
// with whiteouts are refused: they delete files of the layers below, which an unpacked copy cannot say
// without overlayfs's own encoding, and Cairn's images have none.
func extractLayer(blob io.Reader, diffID, dir string) error {
	br := bufio.NewReader(blob)
	var r io.Reader = br
	if magic, err := br.Peek(2); err == nil && bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("layer %s: %w", diffID, err)
		}
		defer zr.Close()
		r = zr
	}
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(r, h))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	var dirs []*tar.Header // modes and owners of directories are set last: files go in first
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("layer %s: %w", diffID, err)
		}
		rel, err := cleanName(hdr.Name)
		if err != nil {
			return fmt.Errorf("layer %s: %w", diffID, err)
		}
		if rel == "." {
			continue
		}
		if strings.HasPrefix(path.Base(rel), ".wh.") {
			return fmt.Errorf("layer %s: %s is a whiteout; the payload holds layers without them", diffID, rel)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			dirs = append(dirs, hdr)
			continue
		case tar.TypeReg:
			if err := writeFile(p, tr, hdr); err != nil {
				return fmt.Errorf("layer %s: %s: %w", diffID, rel, err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, p); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := cleanName(hdr.Linkname)
			if err != nil {
				return fmt.Errorf("layer %s: hard link %s: %w", diffID, rel, err)
			}
			if err := os.Link(filepath.Join(dir, target), p); err != nil {
				return err
			}
			continue // the first name carries the inode's owner, mode and attributes
		default:
			return fmt.Errorf("layer %s: %s is a %q entry, which the payload does not carry", diffID, rel, hdr.Typeflag)
		}
		if err := attributes(p, hdr); err != nil {
			return fmt.Errorf("layer %s: %s: %w", diffID, rel, err)
		}
	}
	// The tar reader stops at the end-of-archive marker; the digest covers what follows it too.
	if _, err := io.Copy(io.Discard, tr); err != nil {
		return err
	}
	if _, err := io.Copy(h, r); err != nil {
		return fmt.Errorf("layer %s: %w", diffID, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID {
		return fmt.Errorf("layer %s: its content has digest %s", diffID, got)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		rel, _ := cleanName(dirs[i].Name)
		if err := attributes(filepath.Join(dir, rel), dirs[i]); err != nil {
			return fmt.Errorf("layer %s: %s: %w", diffID, rel, err)
		}
	}
	return nil
}

func writeFile(p string, r io.Reader, hdr *tar.Header) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, hdr.Size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// attributes gives p the owner, mode and extended attributes the tar header says.
func attributes(p string, hdr *tar.Header) error {
	if err := os.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
		return fmt.Errorf("%w (building the payload needs root: its files keep their owners)", err)
	}
	if hdr.Typeflag != tar.TypeSymlink {
		// After chown, which clears the set-ID bits.
		if err := os.Chmod(p, os.FileMode(hdr.Mode).Perm()|modeBits(hdr.Mode)); err != nil {
			return err
		}
	}
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if err := unix.Lsetxattr(p, name, []byte(v), 0); err != nil {
			return fmt.Errorf("extended attribute %s: %w", name, err)
		}
	}
	return nil
}

// modeBits maps the tar mode's set-ID and sticky bits to Go's.
func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// cleanName makes a tar entry's name relative and refuses one with a ".." element, which would point
// outside the layer.
func cleanName(name string) (string, error) {
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("entry %q leaves the layer", name)
		}
	}
	if rel := path.Clean("/" + name)[1:]; rel != "" {
		return rel, nil
	}
	return ".", nil
}
