package logs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// Rotation defaults: a service's log on disk stays under 30 MiB (the current file and two older ones).
const (
	DefaultMaxSize = 10 << 20
	DefaultKeep    = 2
)

// File is an io.Writer onto a log file that rotates by size: when a write would take it past MaxSize,
// NAME becomes NAME.1, NAME.1 becomes NAME.2 and so on up to Keep older files, the oldest is dropped, and
// writing goes on in a new NAME. A ring's SetSink takes it.
type File struct {
	Path    string
	MaxSize int64 // 0: DefaultMaxSize
	Keep    int   // older files kept besides the current one (0: none, the file starts over)

	mu   sync.Mutex
	f    *os.File
	size int64
}

var _ io.WriteCloser = (*File)(nil)

// Write appends p, rotating first if p would not fit. A p larger than MaxSize still goes in whole, into a
// file of its own: cutting a line would only garble it.
func (w *File) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		// Opened on the first write, and again after a failure, so a log whose disk came back resumes.
		if err := w.open(); err != nil {
			return 0, err
		}
	}
	if w.size > 0 && w.size+int64(len(p)) > w.maxSize() {
		if err := w.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		return n, fmt.Errorf("write log %s: %w", w.Path, err)
	}
	return n, nil
}

// Close closes the current file; a later Write opens it again.
func (w *File) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("close log %s: %w", w.Path, err)
	}
	return nil
}

func (w *File) maxSize() int64 {
	if w.MaxSize > 0 {
		return w.MaxSize
	}
	return DefaultMaxSize
}

func (w *File) open() error {
	f, err := os.OpenFile(w.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log: %w", err)
	}
	w.f, w.size = f, info.Size()
	return nil
}

func (w *File) rotate() error {
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("rotate log %s: %w", w.Path, err)
	}
	if w.Keep <= 0 {
		if err := os.Remove(w.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate log: %w", err)
		}
		return w.open()
	}
	// Renaming onto the oldest drops it; a missing older file is no error (the log is young).
	for i := w.Keep - 1; i >= 1; i-- {
		if err := os.Rename(w.rotated(i), w.rotated(i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate log: %w", err)
		}
	}
	if err := os.Rename(w.Path, w.rotated(1)); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	return w.open()
}

func (w *File) rotated(i int) string { return w.Path + "." + strconv.Itoa(i) }

// RingSource hands out a service's ring, creating it on first use (*supervisor.Supervisor).
type RingSource interface {
	Logs(name string) *logring.Ring
}

// Files keeps rings on disk as Dir/<service>.log while the disk under Dir (EPHEMERAL) is mounted.
type Files struct {
	Dir     string // paths.Paths.Logs()
	MaxSize int64  // 0: DefaultMaxSize
	Keep    int    // 0: DefaultKeep

	mu       sync.Mutex
	attached map[string]attachment
}

type attachment struct {
	ring *logring.Ring
	file *File
}

// Attach starts writing each named service's ring to its file, beginning with the lines the ring kept
// from before (the boot up to the mount is what one wants after a crash). A ring may exist before its
// service starts, so attach every service the node will run. Attaching a name twice is a no-op.
func (fs *Files) Attach(rings RingSource, names ...string) error {
	if err := os.MkdirAll(fs.Dir, 0o750); err != nil {
		return fmt.Errorf("log directory: %w", err)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.attached == nil {
		fs.attached = map[string]attachment{}
	}
	var errs []error
	for _, name := range names {
		if _, ok := fs.attached[name]; ok {
			continue
		}
		keep := fs.Keep
		if keep == 0 {
			keep = DefaultKeep
		}
		f := &File{Path: filepath.Join(fs.Dir, name+".log"), MaxSize: fs.MaxSize, Keep: keep}
		r := rings.Logs(name)
		// Lines added between this copy and SetSink reach the ring but not the file: a narrow window,
		// taken rather than holding the service's logging up.
		for _, l := range r.Tail(0) {
			if _, err := io.WriteString(f, l.Time.UTC().Format(time.RFC3339Nano)+" "+l.Text+"\n"); err != nil {
				errs = append(errs, err)
				break
			}
		}
		r.SetSink(f)
		fs.attached[name] = attachment{ring: r, file: f}
	}
	return errors.Join(errs...)
}

// Detach stops writing to the files and closes them: call it before EPHEMERAL is unmounted.
func (fs *Files) Detach() error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var errs []error
	for name, a := range fs.attached {
		a.ring.SetSink(nil)
		if err := a.file.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(fs.attached, name)
	}
	return errors.Join(errs...)
}
