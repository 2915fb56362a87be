package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/payload/payloadtest"
	"github.com/cairn-os/cairn/machined/internal/bootmedium"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
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
