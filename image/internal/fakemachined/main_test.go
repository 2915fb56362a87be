package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/u-root/u-root/pkg/kmodule"
)

// TestLoadOrder checks that every dependency of virtio_pci comes back, each before the modules that
// need it: the image's test boots lost their network when one went missing.
func TestLoadOrder(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "lib/modules/test")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The lines of Debian 6.1's modules.dep for virtio_pci.
	dep := `kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
`
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	mod := func(n string) string { return filepath.Join(dir, "kernel/drivers/virtio", n+".ko") }
	// Each module must follow these.
	needs := map[string][]string{
		mod("virtio"):     {mod("virtio_ring")},
		mod("virtio_pci"): {mod("virtio"), mod("virtio_ring"), mod("virtio_pci_legacy_dev"), mod("virtio_pci_modern_dev")},
	}
	// The walk is concurrent; repeat it so a lost path shows (and -race sees the appends).
	for range 50 {
		got, err := loadOrder("virtio_pci", kmodule.ProbeOpts{RootDir: root, KVer: "test", IgnoreProcMods: true})
		if err != nil {
			t.Fatalf("loadOrder(virtio_pci) = %v", err)
		}
		if len(got) != 5 {
			t.Fatalf("loadOrder(virtio_pci) = %q, want the 5 modules of modules.dep", got)
		}
		for m, deps := range needs {
			for _, d := range deps {
				if slices.Index(got, d) < 0 || slices.Index(got, d) > slices.Index(got, m) {
					t.Fatalf("loadOrder(virtio_pci) = %q: %s not before %s", got, filepath.Base(d), filepath.Base(m))
				}
			}
		}
	}
}
