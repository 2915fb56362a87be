package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/payload/payloadtest"
	"github.com/cairn-os/cairn/machined/internal/bootmedium"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
	"github.com/cairn-os/cairn/machined/internal/unpack"
)

type countingMounter struct {
	mu     sync.Mutex
	mounts int
}

func (m *countingMounter) Mount(string, string, string, uintptr, string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mounts++
	return nil
}
func (m *countingMounter) Unmount(string, bool) error { return nil }

// identityVerity opens every image as itself.
type identityVerity struct{}

func (identityVerity) OpenImage(_ context.Context, dev, _ string, _ payload.Verity) (string, error) {
	return dev, nil
}
func (identityVerity) Close(context.Context, string) error { return nil }

// testPayloadSource is a payload source over a fake disk list; disks is read at each search.
func testPayloadSource(t *testing.T, disks *[]inventory.Disk, mu *sync.Mutex) (*payloadSource, *countingMounter, string) {
	t.Helper()
	dir := t.TempDir()
	img, rec := payloadtest.Image(2, "this build")
	file := filepath.Join(dir, "payload.squashfs")
	if err := os.WriteFile(file, img, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := filepath.Join(dir, "payload.sha256")
	if err := os.WriteFile(sum, []byte(rec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &countingMounter{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := &payloadSource{log: log, done: make(chan struct{}), sumFile: sum,
		finder: bootmedium.Finder{Opener: inventory.OSOpener{}, Mounter: m, Verity: identityVerity{}, Log: log,
			Disks: func(context.Context) ([]inventory.Disk, error) {
				mu.Lock()
				defer mu.Unlock()
				return *disks, nil
			}}}
	return p, m, file
}

// The search begun at boot is what the workload's mount waits for: the payload is mounted once.
func TestPayloadSourceEarlySearch(t *testing.T) {
	var mu sync.Mutex
	var disks []inventory.Disk
	p, m, file := testPayloadSource(t, &disks, &mu)
	disks = []inventory.Disk{{Name: "vdb", Path: file, Signatures: []probe.Signature{{Type: probe.TypeSquashfs}}}}
	modules := make(chan struct{})
	close(modules)
	p.early(modules, p.log, true)
	mount := p.Payload().Mount
	if err := mount(context.Background()); err != nil {
		t.Fatalf("Mount() = %v", err)
	}
	if err := mount(context.Background()); err != nil {
		t.Fatalf("a second Mount() = %v", err)
	}
	if m.mounts != 1 {
		t.Errorf("payload mounted %d times, want once", m.mounts)
	}
}

// An early search that found nothing (the medium came later) is not the last word: the workload's
// mount searches again.
func TestPayloadSourceSearchesAgain(t *testing.T) {
	var mu sync.Mutex
	var disks []inventory.Disk
	p, m, file := testPayloadSource(t, &disks, &mu)
	modules := make(chan struct{})
	close(modules)
	p.early(modules, p.log, true)
	<-p.done
	if p.err == nil {
		t.Fatal("the early search found a payload on no disk")
	}
	mu.Lock()
	disks = []inventory.Disk{{Name: "sdb", Path: file, Signatures: []probe.Signature{{Type: probe.TypeSquashfs}}}}
	mu.Unlock()
	if err := p.Payload().Mount(context.Background()); err != nil {
		t.Fatalf("Mount() once the disk is there = %v", err)
	}
	if m.mounts != 1 {
		t.Errorf("payload mounted %d times, want once", m.mounts)
	}
}

// isoMounter mounts an ISO medium by copying the payload's stream into its directory.
type isoMounter struct {
	countingMounter
	stream string
}

func (m *isoMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	if fstype == "iso9660" {
		b, err := os.ReadFile(m.stream)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(target, payload.ISOStream), b, 0o444)
	}
	return m.countingMounter.Mount(source, target, fstype, flags, data)
}

// A node booted from an ISO that carries the payload as a stream: the search in maintenance leaves it
// packed, the workload's mount unpacks and mounts it once, an install is told the unpacked file, and the
// stop tasks release it.
func TestPayloadSourceStream(t *testing.T) {
	var mu sync.Mutex
	disks := []inventory.Disk{{Name: "sr0", Path: "/dev/sr0", Signatures: []probe.Signature{{Type: probe.TypeISO9660, Label: "CAIRN"}}}}
	p, _, file := testPayloadSource(t, &disks, &mu)
	img, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := bootmedium.ReadRecords(p.sumFile)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	stream := file + ".zst"
	if err := os.WriteFile(stream, enc.EncodeAll(img[:payload.StreamSize(recs[0])], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &isoMounter{stream: stream}
	var calls []string
	dir := t.TempDir()
	p.finder.Mounter, p.finder.MediumDir = m, filepath.Join(dir, "medium")
	p.finder.AttachLoop = func(f string) (string, error) { calls = append(calls, "losetup "+f); return "/dev/loop9", nil }
	p.finder.DetachLoop = func(dev string) error { calls = append(calls, "losetup -d "+dev); return nil }
	p.unpacker = bootmedium.DirUnpacker{Dir: filepath.Join(dir, "var"), Opener: inventory.OSOpener{}, Log: p.log,
		Free:   func(string) (int64, error) { return 1 << 30, nil },
		Decode: func(_ context.Context, src, dst string) error { return unpack.File(src, dst) },
		Format: func(_ context.Context, image string, _ int64, _, _ string) error { // veritysetup's tree
			return os.WriteFile(image, img, 0o444)
		}}
	modules := make(chan struct{})
	close(modules)
	p.early(modules, p.log, true)
	<-p.done
	if !errors.Is(p.err, bootmedium.ErrUnpackLater) {
		t.Fatalf("the search in maintenance = %v, want ErrUnpackLater", p.err)
	}
	pay := p.Payload()
	for range 2 { // Init, then an install
		if err := pay.Mount(context.Background()); err != nil {
			t.Fatalf("Mount() = %v", err)
		}
	}
	unpacked := filepath.Join(dir, "var", payload.UnpackedFile)
	if m.mounts != 1 || pay.Unpacked() != unpacked {
		t.Errorf("mounted %d times from %q, want once from %s", m.mounts, pay.Unpacked(), unpacked)
	}
	if err := pay.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"losetup " + unpacked, "losetup -d /dev/loop9"}; !slices.Equal(calls, want) {
		t.Errorf("loop devices: %q, want %q", calls, want)
	}
	if pay.Unpacked() != "" {
		t.Errorf("after the release the payload is still mounted from %s", pay.Unpacked())
	}
}
