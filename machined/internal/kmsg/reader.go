package kmsg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-os/cairn/machined/internal/logring"
)

// Device is an open /dev/kmsg: each Read returns one whole record, and a read deadline ends a wait for
// the next one (*os.File).
type Device interface {
	Read(p []byte) (int, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// Reader is the machine API's kernel log (server.KernelLog).
type Reader struct {
	Path     string                       // "/dev/kmsg"
	ProcRoot string                       // "/proc", for the uptime
	Open     func(string) (Device, error) // nil: open the file, non-blocking
	Now      func() time.Time             // nil: time.Now
	// Quiet is how long the device may stay silent before the kept records count as all read
	// (0: DefaultQuiet).
	Quiet time.Duration
}

// Timing.
const (
	DefaultQuiet = 100 * time.Millisecond
	// retry paces a follower whose device cannot wait (not pollable): it asks again this often.
	retry = 250 * time.Millisecond
	// recordMax is a read buffer that fits any record: a smaller one makes the read fail (EINVAL).
	recordMax = 16 << 10
)

// UnreadableError says the kernel log cannot be read here; the API answers FailedPrecondition.
type UnreadableError struct {
	Path string
	Err  error
}

func (e *UnreadableError) Error() string {
	return fmt.Sprintf("the kernel log %s cannot be read: %v (in sandbox mode the host may keep its kernel log from this process)", e.Path, e.Err)
}

func (e *UnreadableError) Unwrap() error { return e.Err }

// Precondition marks the error for the API's code mapping.
func (e *UnreadableError) Precondition() {}

// Dmesg sends the last tail records kept by the kernel (0: all) and, with follow, every later one until
// ctx ends.
func (r *Reader) Dmesg(ctx context.Context, tail int, follow bool, send func(logring.Record) error) error {
	boot, up, err := r.bootTime()
	if err != nil {
		return err
	}
	dev, err := r.open()
	if err != nil {
		return &UnreadableError{Path: r.Path, Err: err}
	}
	var once sync.Once
	closeDev := func() { once.Do(func() { dev.Close() }) }
	defer closeDev()
	// Closing the device is what wakes a read that waits for the next record.
	defer context.AfterFunc(ctx, closeDev)()

	line := func(rec Record) logring.Record {
		return logring.Record{Time: boot.Add(rec.Since), Service: "kernel", Line: rec.Line()}
	}
	buf := make([]byte, recordMax)
	// The kept records end where the device falls quiet, or at the first record logged after this call
	// began: a kernel that logs without pause must not hold the answer up.
	var kept []Record
	var newer *Record
	for {
		_ = dev.SetReadDeadline(time.Now().Add(r.quiet()))
		rec, ok, err := r.next(dev, buf)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if rec.Since > up+time.Second { // a second of margin: the uptime has a resolution of 10 ms
			newer = &rec
			break
		}
		kept = append(kept, rec)
		if tail > 0 && len(kept) >= 2*tail { // trim now and then, so memory stays about tail records
			kept = append(kept[:0], kept[len(kept)-tail:]...)
		}
	}
	if tail > 0 && len(kept) > tail {
		kept = kept[len(kept)-tail:]
	}
	for _, rec := range kept {
		if err := send(line(rec)); err != nil {
			return err
		}
	}
	if !follow {
		return nil
	}
	if newer != nil {
		if err := send(line(*newer)); err != nil {
			return err
		}
	}
	_ = dev.SetReadDeadline(time.Time{})
	for {
		rec, ok, err := r.next(dev, buf)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			}
			continue
		}
		if err := send(line(rec)); err != nil {
			return err
		}
	}
}

// next reads one record; ok is false when there is none to read now.
func (r *Reader) next(dev Device, buf []byte) (Record, bool, error) {
	for {
		n, err := dev.Read(buf)
		switch {
		case errors.Is(err, syscall.EPIPE):
			continue // records were overwritten before we read them: the read after goes on with the oldest left
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, syscall.EAGAIN), errors.Is(err, io.EOF):
			return Record{}, false, nil
		case err != nil:
			return Record{}, false, fmt.Errorf("read the kernel log %s: %w", r.Path, err)
		}
		rec, err := Parse(string(buf[:n]))
		if err != nil {
			continue // not a record: the kernel's format is a contract, so skip rather than stop
		}
		return rec, true, nil
	}
}

func (r *Reader) open() (Device, error) {
	if r.Open != nil {
		return r.Open(r.Path)
	}
	// Non-blocking: Go's poller then waits for records and honours deadlines; where the device cannot be
	// polled, a read with nothing to give returns EAGAIN instead of hanging.
	return os.OpenFile(r.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

func (r *Reader) quiet() time.Duration {
	if r.Quiet > 0 {
		return r.Quiet
	}
	return DefaultQuiet
}

// bootTime is the wall-clock time of boot, now less the uptime, and the uptime. Record times count from
// boot on the kernel's monotonic clock; the uptime also counts time suspended, which a server node does
// not spend.
func (r *Reader) bootTime() (time.Time, time.Duration, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	path := filepath.Join(r.ProcRoot, "uptime")
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("boot time: %w", err)
	}
	up, err := parseUptime(string(b))
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("boot time: %s: %w", path, err)
	}
	return now().Add(-up), up, nil
}

// parseUptime reads /proc/uptime ("6167.55 2610.64": seconds up, seconds idle).
func parseUptime(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, errors.New("empty")
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil || sec < 0 {
		return 0, fmt.Errorf("uptime %q is not a number of seconds", f[0])
	}
	return time.Duration(sec * float64(time.Second)), nil
}
