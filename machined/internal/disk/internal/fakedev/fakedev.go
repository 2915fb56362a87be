// Package fakedev is an in-memory block device for unit tests: sparse (only written ranges take memory, the
// rest reads as zeros) and strict (reads and writes outside the device fail, so a test notices them).
// It also writes minimal superblocks, enough for package probe to recognise them.
package fakedev

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// Device is a sparse in-memory device of a fixed size.
type Device struct {
	mu     sync.Mutex
	size   int64
	chunks []chunk
	Writes int // number of WriteAt calls, so tests can assert nothing was written
}

type chunk struct {
	off  int64
	data []byte
}

// New returns a zero-filled device of size bytes.
func New(size int64) *Device { return &Device{size: size} }

// Size is the device's size in bytes.
func (d *Device) Size() int64 { return d.size }

// ReadAt implements io.ReaderAt.
func (d *Device) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off < 0 || off+int64(len(p)) > d.size {
		return 0, fmt.Errorf("fakedev: read of %d bytes at %d outside a %d-byte device", len(p), off, d.size)
	}
	clear(p)
	for _, c := range d.chunks {
		lo, hi := max(off, c.off), min(off+int64(len(p)), c.off+int64(len(c.data)))
		if lo < hi {
			copy(p[lo-off:hi-off], c.data[lo-c.off:hi-c.off])
		}
	}
	return len(p), nil
}

// WriteAt implements io.WriterAt.
func (d *Device) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off < 0 || off+int64(len(p)) > d.size {
		return 0, fmt.Errorf("fakedev: write of %d bytes at %d outside a %d-byte device", len(p), off, d.size)
	}
	d.Writes++
	d.chunks = append(d.chunks, chunk{off: off, data: append([]byte(nil), p...)})
	return len(p), nil
}

// Close implements io.Closer.
func (d *Device) Close() error { return nil }

// Sync implements the Sync of a real device.
func (d *Device) Sync() error { return nil }

var _ interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
} = (*Device)(nil)

// PutExt4 writes a minimal ext4 superblock at off (the start of a partition or device).
func PutExt4(w io.WriterAt, off int64, label string, uuid [16]byte) error {
	sb := make([]byte, 1024)
	binary.LittleEndian.PutUint16(sb[0x38:], 0xef53)
	binary.LittleEndian.PutUint32(sb[0x60:], 0x40) // extents: ext4
	copy(sb[0x68:], uuid[:])
	copy(sb[0x78:0x88], label)
	_, err := w.WriteAt(sb, off+1024)
	return err
}

// PutXFS writes a minimal xfs superblock at off.
func PutXFS(w io.WriterAt, off int64, label string, uuid [16]byte) error {
	sb := make([]byte, 512)
	copy(sb, "XFSB")
	binary.BigEndian.PutUint32(sb[4:], 4096)
	binary.BigEndian.PutUint32(sb[88:], 4)
	binary.BigEndian.PutUint16(sb[102:], 512)
	copy(sb[32:], uuid[:])
	copy(sb[108:120], label)
	_, err := w.WriteAt(sb, off)
	return err
}

// PutISO9660 writes a primary volume descriptor at byte 32768 of the device.
func PutISO9660(w io.WriterAt, label string) error {
	vd := make([]byte, 2048)
	vd[0] = 1
	copy(vd[1:], "CD001")
	vd[6] = 1
	copy(vd[40:72], fmt.Sprintf("%-32s", label))
	copy(vd[813:], "2025010203040500")
	_, err := w.WriteAt(vd, 32768)
	return err
}

// PutSquashfs writes a squashfs 4.0 superblock at off.
func PutSquashfs(w io.WriterAt, off int64) error {
	sb := make([]byte, 96)
	copy(sb, "hsqs")
	binary.LittleEndian.PutUint16(sb[28:], 4)
	_, err := w.WriteAt(sb, off)
	return err
}
