package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/workload"
)

// payloadDevice is where init leaves the loop device it attached the initramfs's payload image to (the
// image itself is gone from view once init has switched to the root image; the loop device keeps it).
const payloadDevice = "/run/cairn/payload-device"

// mounter is mount(2) (sys.Mounter).
type mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
}

// nodePayload is a node's payload: the image init attached, checked against the SHA-256 the root image
// records before it is mounted read-only on payload.MountPoint. The root image is inside the initramfs
// the boot loader loaded, so the payload is exactly the one built with this machined.
func nodePayload(m mounter) workload.Payload {
	return workload.Payload{Dir: payload.MountPoint, Mount: func(ctx context.Context) error {
		dev, err := os.ReadFile(payloadDevice)
		if err != nil {
			return fmt.Errorf("payload: no payload image came with this boot (%w); the initramfs must carry %s", err, payload.ImageFile)
		}
		want, err := os.ReadFile(payload.SumFile)
		if err != nil {
			return fmt.Errorf("payload: the root image records no SHA-256 for it: %w", err)
		}
		device := strings.TrimSpace(string(dev))
		if err := checkSHA256(ctx, device, strings.TrimSpace(string(want))); err != nil {
			return err
		}
		return m.Mount(device, payload.MountPoint, "squashfs", unix.MS_RDONLY|unix.MS_NODEV, "")
	}}
}

// checkSHA256 reads the whole file (or device) and compares its SHA-256 with want.
func checkSHA256(ctx context.Context, file, want string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return fmt.Errorf("payload: read %s: %w", file, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("payload: %s has SHA-256 %s but the root image says %s: not mounting it", file, got, want)
	}
	return nil
}

// ctxReader stops a long read when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
