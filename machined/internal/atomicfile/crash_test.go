package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// errPowerCut is what every step returns from the power cut on.
var errPowerCut = errors.New("power cut")

// crashFS is a filesystem that loses power after a number of steps. It keeps what a journaling
// filesystem may show after the cut: a file's data is durable once the file was synced, and a directory
// entry (a new name, a rename) once its directory was synced; what was not synced may or may not have
// reached the disk, so recovered lists every combination.
type crashFS struct {
	stepsLeft int
	inodes    []*inode
	names     map[string]int // what the running system sees: path → inode
	durable   map[string]int // the entries as of the last directory sync
	temps     int
}

type inode struct {
	data, synced []byte
}

func newCrashFS(steps int, files map[string]string) *crashFS {
	fs := &crashFS{stepsLeft: steps, names: map[string]int{}, durable: map[string]int{}}
	for p, data := range files {
		fs.inodes = append(fs.inodes, &inode{data: []byte(data), synced: []byte(data)})
		fs.names[p], fs.durable[p] = len(fs.inodes)-1, len(fs.inodes)-1
	}
	return fs
}

// step spends one step of power; the cut makes it and every later one fail before it acts.
func (fs *crashFS) step() error {
	if fs.stepsLeft == 0 {
		return errPowerCut
	}
	fs.stepsLeft--
	return nil
}

func (fs *crashFS) MkdirAll(string, os.FileMode) error { return fs.step() }

func (fs *crashFS) CreateTemp(dir, pattern string) (file, error) {
	if err := fs.step(); err != nil {
		return nil, err
	}
	fs.temps++
	name := filepath.Join(dir, strings.Replace(pattern, "*", fmt.Sprint(fs.temps), 1))
	fs.inodes = append(fs.inodes, &inode{})
	fs.names[name] = len(fs.inodes) - 1
	return &crashFile{fs: fs, name: name, ino: fs.inodes[len(fs.inodes)-1]}, nil
}

func (fs *crashFS) Rename(from, to string) error {
	if err := fs.step(); err != nil {
		return err
	}
	ino, ok := fs.names[from]
	if !ok {
		return os.ErrNotExist
	}
	delete(fs.names, from)
	fs.names[to] = ino
	return nil
}

func (fs *crashFS) Remove(name string) error {
	if err := fs.step(); err != nil {
		return err
	}
	if _, ok := fs.names[name]; !ok {
		return os.ErrNotExist
	}
	delete(fs.names, name)
	return nil
}

func (fs *crashFS) SyncDir(string) error {
	if err := fs.step(); err != nil {
		return err
	}
	fs.durable = map[string]int{}
	for p, ino := range fs.names {
		fs.durable[p] = ino
	}
	return nil
}

// recovered is what path may read after the power cut: its content for each combination of the
// unsynced entries and data reaching the disk or not ("(no file)" where the name is not there).
func (fs *crashFS) recovered(path string) []string {
	var out []string
	for _, names := range []map[string]int{fs.durable, fs.names} {
		ino, ok := names[path]
		if !ok {
			out = append(out, "(no file)")
			continue
		}
		out = append(out, string(fs.inodes[ino].synced), string(fs.inodes[ino].data))
	}
	return out
}

type crashFile struct {
	fs   *crashFS
	name string
	ino  *inode
}

func (f *crashFile) Name() string { return f.name }

func (f *crashFile) Write(b []byte) (int, error) {
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	f.ino.data = append(f.ino.data, b...)
	return len(b), nil
}

func (f *crashFile) Chmod(os.FileMode) error { return f.fs.step() }

func (f *crashFile) Sync() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	f.ino.synced = append([]byte(nil), f.ino.data...)
	return nil
}

func (f *crashFile) Close() error { return f.fs.step() }

// TestPowerCutLeavesOldOrNew cuts the power after every step of WriteFile, replacing a file and making
// a new one (the node lock and the machine config are written this way), and checks every state the disk
// may come back in: the old content or the new, never an empty or partial file; and once WriteFile has
// returned nil, only the new.
func TestPowerCutLeavesOldOrNew(t *testing.T) {
	const path, oldData, newData = "/state/lock.json", `{"lockedBy":"init"}`, `{"lockedBy":"join","cluster":"c"}`
	for _, old := range []bool{true, false} {
		existing, before := map[string]string{}, "(no file)"
		if old {
			existing[path], before = oldData, oldData
		}
		for steps := 0; ; steps++ {
			fs := newCrashFS(steps, existing)
			err := writeFile(fs, path, []byte(newData), 0o600)
			for _, got := range fs.recovered(path) {
				if got != before && got != newData {
					t.Errorf("old file %v, power cut after %d steps: %s may read %q, want %q or %q", old, steps, path, got, before, newData)
				}
				if err == nil && got != newData {
					t.Errorf("old file %v: WriteFile returned nil after %d steps, but %s may read %q after a power cut", old, steps, path, got)
				}
			}
			if err == nil {
				break // every step done: the power cut came after the end
			}
			if !errors.Is(err, errPowerCut) {
				t.Fatalf("writeFile = %v, want the power cut", err)
			}
		}
	}
}
