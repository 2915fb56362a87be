package logs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// The kubelet keeps a container's log at <root>/<namespace>_<pod>_<uid>/<container>/<restart>.log: a new
// file for each restart of the container, a new pod directory when a static pod's manifest changes, and on
// rotation the file is renamed (<restart>.log.<time>, later compressed) and a new one opened in its place.

// newestLog returns the most recently written log file of a container in a namespace's pods.
func newestLog(root, namespace, container string) (string, fs.FileInfo, error) {
	logs := containerLogs(root, namespace, container)
	if len(logs) == 0 {
		return "", nil, fmt.Errorf("no log file of container %s in namespace %s under %s: %w", container, namespace, root, fs.ErrNotExist)
	}
	return logs[0].path, logs[0].info, nil
}

// previousLog returns the log file of the container's run before the newest: what it wrote before it
// crashed or was restarted.
func previousLog(root, namespace, container string) (string, error) {
	logs := containerLogs(root, namespace, container)
	if len(logs) < 2 {
		return "", fmt.Errorf("container %s has no earlier run with a log under %s: %w", container, root, fs.ErrNotExist)
	}
	return logs[1].path, nil
}

type logCandidate struct {
	path    string
	info    fs.FileInfo
	restart int
}

// containerLogs lists the current log files of a container (one per run), newest write first; on a tie
// (coarse timestamps) the higher restart number first.
func containerLogs(root, namespace, container string) []logCandidate {
	var out []logCandidate
	for _, dir := range podDirs(root, namespace) {
		files, err := os.ReadDir(filepath.Join(dir, container))
		if err != nil {
			continue
		}
		for _, f := range files {
			n, ok := restartOf(f.Name())
			if !ok {
				continue
			}
			info, err := f.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			out = append(out, logCandidate{path: filepath.Join(dir, container, f.Name()), info: info, restart: n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].info.ModTime(), out[j].info.ModTime()
		if !a.Equal(b) {
			return a.After(b)
		}
		return out[i].restart > out[j].restart
	})
	return out
}

// podDirs lists the pod directories of a namespace.
func podDirs(root, namespace string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), namespace+"_") {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out
}

// podContainers lists the container names that have logs in a namespace's pods.
func podContainers(root, namespace string) []string {
	var out []string
	for _, dir := range podDirs(root, namespace) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// restartOf reads the restart number of a current log file name ("3.log"); rotated files do not count.
func restartOf(name string) (int, bool) {
	num, ok := strings.CutSuffix(name, ".log")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}

// podLog streams one container's log across its files.
type podLog struct {
	root, namespace, container string
	poll                       time.Duration
}

// maxPending bounds the bytes kept waiting for a newline; the runtime always ends its lines, so only a
// damaged file gets there.
const maxPending = 1 << 20

// logFile is an open log file read from where the last read stopped.
type logFile struct {
	f       *os.File
	offset  int64
	pending []byte // the start of a line whose newline has not been written yet
	buf     []byte
	asm     assembler
}

func openLog(path string) (*logFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open container log: %w", err)
	}
	return &logFile{f: f}, nil
}

// readNew emits every complete line written since the last call.
func (l *logFile) readNew(emit func(time.Time, string) error) error {
	if l.buf == nil {
		l.buf = make([]byte, 32<<10)
	}
	for {
		n, err := l.f.Read(l.buf)
		if n > 0 {
			l.offset += int64(n)
			l.pending = append(l.pending, l.buf[:n]...)
			if err := l.lines(emit); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read container log %s: %w", l.f.Name(), err)
		}
	}
}

func (l *logFile) lines(emit func(time.Time, string) error) error {
	start := 0
	defer func() { l.pending = l.pending[:copy(l.pending, l.pending[start:])] }()
	for {
		i := bytes.IndexByte(l.pending[start:], '\n')
		if i < 0 {
			if len(l.pending)-start > maxPending {
				raw := string(l.pending[start:])
				start = len(l.pending)
				return emit(time.Now(), raw)
			}
			return nil
		}
		raw := string(l.pending[start : start+i])
		start += i + 1
		c, err := parseCRI(raw)
		if err != nil {
			// A damaged line is still worth showing as it is.
			if err := emit(time.Now(), raw); err != nil {
				return err
			}
			continue
		}
		if t, msg, ok := l.asm.add(c); ok {
			if err := emit(t, msg); err != nil {
				return err
			}
		}
	}
}

// flush emits the parts of a line the container never finished (its file ended).
func (l *logFile) flush(emit func(time.Time, string) error) error {
	for stream, p := range l.asm.parts {
		delete(l.asm.parts, stream)
		if err := emit(p.start, p.b.String()); err != nil {
			return err
		}
	}
	return nil
}

// stream sends the last tail lines of the file at path (0: all) and, with follow, every later line,
// moving to the next file when the kubelet rotates the log or the container restarts.
func (p *podLog) stream(ctx context.Context, path string, tail int, follow bool, send func(logring.Record) error) error {
	lf, err := openLog(path)
	if err != nil {
		return err
	}
	defer func() { lf.f.Close() }()
	emit := func(t time.Time, msg string) error {
		return send(logring.Record{Time: t, Service: p.container, Line: msg})
	}
	if err := p.sendTail(lf, tail, emit); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	t := time.NewTicker(p.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := lf.readNew(emit); err != nil {
			return err
		}
		cur, err := lf.f.Stat()
		if err != nil {
			return fmt.Errorf("container log %s: %w", lf.f.Name(), err)
		}
		if cur.Size() < lf.offset { // truncated in place: start over
			if _, err := lf.f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("container log %s: %w", lf.f.Name(), err)
			}
			lf.offset, lf.pending = 0, lf.pending[:0]
			continue
		}
		// A file written after ours is the log now (ours was rotated away, or the container restarted);
		// ours has been read to its end just above.
		next, info, err := newestLog(p.root, p.namespace, p.container)
		if err != nil || os.SameFile(info, cur) || info.ModTime().Before(cur.ModTime()) {
			continue
		}
		if err := lf.flush(emit); err != nil {
			return err
		}
		nf, err := openLog(next)
		if err != nil {
			continue // rotated again already: the next tick finds the newest
		}
		lf.f.Close()
		lf = nf
		if err := lf.readNew(emit); err != nil {
			return err
		}
	}
}

// sendTail reads the file to its end and sends its last tail lines (0: all of them).
func (p *podLog) sendTail(lf *logFile, tail int, emit func(time.Time, string) error) error {
	if tail <= 0 {
		return lf.readNew(emit)
	}
	type line struct {
		t   time.Time
		msg string
	}
	var kept []line
	err := lf.readNew(func(t time.Time, msg string) error {
		kept = append(kept, line{t, msg})
		if len(kept) >= 2*tail { // trim now and then, so memory stays about tail lines
			kept = append(kept[:0], kept[len(kept)-tail:]...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(kept) > tail {
		kept = kept[len(kept)-tail:]
	}
	for _, l := range kept {
		if err := emit(l.t, l.msg); err != nil {
			return err
		}
	}
	return nil
}
