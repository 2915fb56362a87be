package unpack

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func encode(t *testing.T, b []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

func TestFile(t *testing.T) {
	dir := t.TempDir()
	want := bytes.Repeat([]byte("the payload's common code, stored once. "), 50_000)
	stream := filepath.Join(dir, "payload.squashfs.zst")
	if err := os.WriteFile(stream, encode(t, want), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "payload.squashfs")
	if got := Main([]string{stream, dst}, os.Stderr); got != 0 {
		t.Fatalf("Main(%s, %s) = %d, want 0", stream, dst, got)
	}
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, want) {
		t.Errorf("unpacked %d bytes (%v), want the %d packed", len(got), err, len(want))
	}
	// An existing file is never written over: the caller unpacks into a file of its own.
	if err := File(stream, dst); !errors.Is(err, os.ErrExist) {
		t.Errorf("File() onto an existing file = %v, want os.ErrExist", err)
	}

	// A stream cut short fails and leaves nothing behind.
	b, _ := os.ReadFile(stream)
	short := filepath.Join(dir, "short.zst")
	if err := os.WriteFile(short, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut")
	if err := File(short, cut); err == nil {
		t.Error("File(a stream cut short) = nil, want an error")
	}
	if _, err := os.Stat(cut); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("File(a stream cut short) left %s behind (%v)", cut, err)
	}

	var stderr strings.Builder
	if got := Main([]string{stream}, &stderr); got != 2 || !strings.Contains(stderr.String(), "usage: unpack-payload STREAM FILE") {
		t.Errorf("Main(one argument) = %d, %q; want 2 and the usage", got, stderr.String())
	}
}

func TestSize(t *testing.T) {
	b := bytes.Repeat([]byte{7}, 123_456)
	for _, tc := range []struct {
		name   string
		stream []byte
		want   int64
		err    string
	}{
		{name: "a frame that records its size", stream: encode(t, b), want: 123_456},
		{name: "not zstd", stream: []byte("hsqs, a squashfs superblock"), err: "not a zstd stream"},
		{name: "empty", stream: nil, err: "not a zstd stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Size(bytes.NewReader(tc.stream))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Size() = %d, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Size() = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// A stream whose window is wider than the payload's would make the helper hold more than it should.
func TestStreamRefusesAWiderWindow(t *testing.T) {
	// Written as a stream (no content size, so the window is the frame's own): 2^29 bytes.
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf, zstd.WithWindowSize(1<<29), zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(bytes.Repeat([]byte("x"), 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	err = Stream(new(bytes.Buffer), &buf)
	if err == nil || !strings.Contains(err.Error(), "window of at most 2^28 bytes") {
		t.Errorf("Stream(a 2^29 window) = %v, want it refused, naming the payload's window", err)
	}
}
