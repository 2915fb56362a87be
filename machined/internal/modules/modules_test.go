package modules

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoadToleratesMissingHardware(t *testing.T) {
	l := Loader{Probe: func(name, _ string) error {
		switch name {
		case "e1000":
			return syscall.ENODEV
		case "virtio_net":
			return syscall.EEXIST
		case "broken":
			return errors.New("exec format error")
		}
		return nil
	}}
	n, err := l.Load([]string{"virtio_pci", "e1000", "virtio_net", "broken"})
	if n != 1 || err == nil || !strings.Contains(err.Error(), "broken") || strings.Contains(err.Error(), "e1000") {
		t.Fatalf("Load = %d, %v; want 1 loaded and only the broken module reported", n, err)
	}
}

func TestPaths(t *testing.T) {
	list := []byte("kernel/fs/xfs/xfs.ko\n\n# comment\nkernel/drivers/char/hw_random/virtio-rng.ko.xz\nkernel/fs/nls/nls_iso8859-1.ko\n")
	got := Paths(list, []string{"virtio_rng", "xfs"})
	if diff := cmp.Diff([]string{"kernel/fs/nls/nls_iso8859-1.ko"}, got); diff != "" {
		t.Errorf("Paths (-want +got):\n%s", diff)
	}
}
