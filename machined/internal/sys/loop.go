package sys

import (
	"fmt"
	"os"

	"github.com/u-root/u-root/pkg/mount/loop"
)

// AttachLoop binds file to a free loop device, read-only, and returns the device. The payload's image is
// only ever read (dm-verity checks what is read), so the loop is read-only whether its file is on the ISO
// or on a writable volume.
func AttachLoop(file string) (string, error) {
	dev, err := loop.FindDevice()
	if err != nil {
		return "", fmt.Errorf("find a free loop device: %w", err)
	}
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	d, err := os.Open(dev) // read-only: the kernel makes the loop read-only
	if err != nil {
		return "", err
	}
	defer d.Close()
	if err := loop.SetFD(int(d.Fd()), int(f.Fd())); err != nil {
		return "", fmt.Errorf("bind %s to %s: %w", file, dev, err)
	}
	return dev, nil
}

// DetachLoop frees a loop device from its file; while something still holds the device the kernel frees
// it once the last holder closes it.
func DetachLoop(dev string) error {
	if err := loop.ClearFile(dev); err != nil {
		return fmt.Errorf("free %s: %w", dev, err)
	}
	return nil
}
