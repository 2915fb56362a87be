// Package modules loads kernel modules from the root image's /lib/modules, dependencies first, with
// u-root's kmodule. The image builder ships a subset of the kernel's modules and a list of them in load
// order (cairn.load).
package modules

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"
)

// Network are loaded first, so the API answers as early as possible: virtio and Intel NICs, and QEMU's
// fw_cfg (how the ISO and raw-disk boots receive per-node kernel arguments).
var Network = []string{"virtio_pci", "virtio_mmio", "virtio_net", "e1000", "e1000e", "qemu_fw_cfg"}

// Storage are loaded next, before the node looks for its STATE disk: disk controllers and the
// filesystems of Cairn's volumes (libcrc32c asks the crypto API for crc32c at run time, and nothing
// answers a request to load it: both implementations are listed).
var Storage = []string{"crc32c_generic", "crc32c_intel", "virtio_blk", "virtio_scsi", "sd_mod", "ahci", "nvme", "xfs", "ext4", "vfat"}

// ListName is the builder's list of shipped modules, in load order, in /lib/modules/RELEASE.
const ListName = "cairn.load"

// Loader loads modules by name.
type Loader struct {
	// Probe loads a module and its dependencies (kmodule.Probe).
	Probe func(name, params string) error
	// File loads one module file, no dependencies (kmodule.FileInit).
	File func(path string) error
}

// Load loads each module. A module for hardware the machine lacks (ENODEV, ENOENT from the driver) or one
// already loaded (EEXIST) is not an error; others are returned together.
func (l Loader) Load(names []string) (loaded int, errs error) {
	var all []error
	for _, n := range names {
		err := l.Probe(n, "")
		switch {
		case err == nil:
			loaded++
		case errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.ENXIO):
		default:
			all = append(all, fmt.Errorf("load module %s: %w", n, err))
		}
	}
	return loaded, errors.Join(all...)
}

// LoadFiles loads module files in the given order (a load list is in dependency order), with the same
// tolerance as Load. It needs no name lookup: some modules' names mix - and _ (nls_iso8859-1), which
// kmodule's lookup by name cannot find.
func (l Loader) LoadFiles(dir string, rels []string) (loaded int, errs error) {
	var all []error
	for _, rel := range rels {
		err := l.File(path.Join(dir, rel))
		switch {
		case err == nil:
			loaded++
		case errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.ENXIO):
		default:
			all = append(all, fmt.Errorf("load module %s: %w", rel, err))
		}
	}
	return loaded, errors.Join(all...)
}

// Paths reads a load list and returns its module paths (relative to the modules directory), minus the
// modules named in skip (comparing - and _ alike, as the kernel does).
func Paths(list []byte, skip []string) []string {
	norm := func(s string) string { return strings.ReplaceAll(s, "-", "_") }
	drop := map[string]bool{}
	for _, s := range skip {
		drop[norm(s)] = true
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rel := strings.Fields(line)[0]
		if !drop[norm(moduleName(rel))] {
			out = append(out, rel)
		}
	}
	return out
}

func moduleName(rel string) string {
	base := path.Base(rel)
	for _, ext := range []string{".xz", ".gz", ".zst"} {
		base = strings.TrimSuffix(base, ext)
	}
	return strings.TrimSuffix(base, ".ko")
}
