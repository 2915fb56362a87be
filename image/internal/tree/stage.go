package tree

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Stage writes the tree under dir (which must be empty or absent) so that mksquashfs can pack it.
// Ownership and timestamps are not set here: the packer forces them, which needs no root.
func Stage(t *Tree, dir string) error {
	for _, e := range t.Entries() {
		dst := filepath.Join(dir, Rel(e.Path))
		var err error
		switch e.Kind {
		case Dir:
			err = os.MkdirAll(dst, 0o755)
			if err == nil {
				err = os.Chmod(dst, e.Perm)
			}
		case Symlink:
			err = os.Symlink(e.Link, dst)
		case File:
			err = writeFile(dst, e)
		default:
			err = errors.New("device nodes cannot be staged without root")
		}
		if err != nil {
			return fmt.Errorf("stage %s: %w", e.Path, err)
		}
	}
	return nil
}

func writeFile(dst string, e Entry) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if e.Data != nil {
		_, err = f.Write(e.Data)
	} else {
		err = copyFrom(f, e.Src)
	}
	if err == nil {
		err = f.Chmod(e.Perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func copyFrom(w io.Writer, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = io.Copy(w, in)
	return err
}

// Size returns the bytes an entry's content takes, reading the host file's size when needed.
func Size(e Entry) (int64, error) {
	switch {
	case e.Kind == Symlink:
		return int64(len(e.Link)), nil
	case e.Kind != File:
		return 0, nil
	case e.Data != nil:
		return int64(len(e.Data)), nil
	}
	fi, err := os.Stat(e.Src)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
