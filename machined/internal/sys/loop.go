package sys

import (
	"fmt"

	"github.com/u-root/u-root/pkg/mount/loop"
)

// AttachLoop binds file to a free loop device and returns the device. A file on a read-only
// filesystem (the ISO) gives a read-only device: the kernel makes the loop as writable as its file.
func AttachLoop(file string) (string, error) {
	dev, err := loop.FindDevice()
	if err != nil {
		return "", fmt.Errorf("find a free loop device: %w", err)
	}
	if err := loop.SetFile(dev, file); err != nil {
		return "", fmt.Errorf("bind %s to %s: %w", file, dev, err)
	}
	return dev, nil
}
