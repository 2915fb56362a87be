package images

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// Header describes the archive a client is about to send.
type Header struct {
	FileName string // the client's name for it, for messages only
	Size     uint64 // 0: unknown
	SHA256   string // hex, as the client computed it; "": not checked
}

// Phases of an import, as Progress reports them.
const (
	PhaseReceiving = "receiving"
	PhaseVerifying = "verifying"
	PhaseImporting = "importing"
	PhaseUnpacking = "unpacking"
)

// Progress is one step of an import.
type Progress struct {
	Phase    string
	Received uint64 // receiving: bytes stored so far
	Size     uint64 // receiving: the size the header announced
	Image    string // unpacking: the image
}

// progressEvery paces the receiving progress: often enough that a slow upload visibly moves.
const progressEvery = time.Second

// NoSpaceError: the node's EPHEMERAL volume cannot hold the import.
type NoSpaceError struct{ Msg string }

func (e *NoSpaceError) Error() string { return e.Msg }

// spool copies the upload into f, hashing it, and checks it against the header: the announced size
// (neither more nor less) and, when given, the SHA-256.
func spool(f *os.File, data io.Reader, h Header, progress func(Progress)) (int64, error) {
	sum := sha256.New()
	w := &spoolWriter{f: f, sum: sum, h: h, progress: progress, last: time.Now()}
	buf := make([]byte, 1<<20)
	_, err := io.CopyBuffer(w, data, buf)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return w.n, &NoSpaceError{Msg: fmt.Sprintf("the node's EPHEMERAL volume filled up after %s of the archive", humanBytes(uint64(w.n)))}
		}
		return w.n, err
	}
	if h.Size > 0 && uint64(w.n) != h.Size {
		return w.n, archiveErr("the upload ended at byte %d of the %d announced: the archive arrived incomplete", w.n, h.Size)
	}
	if w.n == 0 {
		return 0, archiveErr("the archive is empty (0 bytes)")
	}
	if h.SHA256 != "" {
		if got := hex.EncodeToString(sum.Sum(nil)); got != h.SHA256 {
			return w.n, archiveErr("the archive the node received has SHA-256 %s, but the client computed %s: it changed on the way", got, h.SHA256)
		}
	}
	if err := f.Sync(); err != nil {
		return w.n, fmt.Errorf("spool the archive: %w", err)
	}
	if progress != nil {
		progress(Progress{Phase: PhaseReceiving, Received: uint64(w.n), Size: h.Size})
	}
	return w.n, nil
}

type spoolWriter struct {
	f        *os.File
	sum      io.Writer
	h        Header
	n        int64
	progress func(Progress)
	last     time.Time
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	if w.h.Size > 0 && uint64(w.n)+uint64(len(p)) > w.h.Size {
		return 0, archiveErr("the client sent more than the %d bytes it announced", w.h.Size)
	}
	n, err := w.f.Write(p)
	w.sum.Write(p[:n])
	w.n += int64(n)
	if err != nil {
		return n, err
	}
	if w.progress != nil && time.Since(w.last) >= progressEvery {
		w.progress(Progress{Phase: PhaseReceiving, Received: uint64(w.n), Size: w.h.Size})
		w.last = time.Now()
	}
	return n, nil
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
