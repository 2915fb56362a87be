// Package modules loads kernel modules from the root image's /lib/modules in the order the boot needs
// them. The image builder ships a subset of the kernel's modules with their modules.dep and
// modules.alias, and a list of them in load order (cairn.load).
//
// Under emulation every module costs tens to hundreds of milliseconds (it is read, its signature hashed,
// relocated), so what the API waits for is only what this machine's hardware needs: drivers whose
// aliases match a device present (see Aliases.Present). The rest of the list loads once the node knows
// what it is.
package modules

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cairn-os/cairn/internal/modload"
)

// Buses are the drivers of the transports other devices sit on: virtio over PCI (q35, real machines'
// hypervisors) or over MMIO (microvm). The devices behind them appear only once these are loaded.
var Buses = []string{"virtio_pci", "virtio_mmio"}

// FirmwareConfig is QEMU's fw_cfg, how the ISO and raw-disk boots receive per-node kernel arguments:
// loaded first, because those arguments are part of the command line every other module's parameters
// come from.
var FirmwareConfig = []string{"qemu_fw_cfg"}

// Network are the NICs: needed before the network is configured.
var Network = []string{"virtio_net", "e1000", "e1000e"}

// Disks are the disk controllers. Every one the machine needs is loaded before the node looks for its
// STATE disk: a disk the node cannot see would make a configured node look fresh. Loading a controller's
// driver returns once its disks are found (the kernel waits for the driver's asynchronous probing and
// scanning before finit_module returns).
var Disks = []string{"virtio_blk", "virtio_scsi", "ahci", "nvme"}

// DiskTypes bind the disks found behind SCSI-like controllers (SATA through ahci, virtio-scsi): their
// aliases match those disks, so they are matched after Disks are loaded.
var DiskTypes = []string{"sd_mod", "sr_mod"}

// Filesystems mount Cairn's volumes. Deciding that a node is fresh needs none of them (disk signatures
// are read by machined itself), so they load after that, or before the first mount when STATE is found.
// libcrc32c asks the crypto API for crc32c at run time, and nothing answers a request to load it: both
// implementations are listed.
var Filesystems = []string{"crc32c_generic", "crc32c_intel", "xfs", "ext4", "vfat"}

// Encryption opens an encrypted STATE: dm-crypt with its cipher (aes-xts; AES itself is built into
// Debian's kernel), the kernel's crypto API for cryptsetup's key slots, and the TPM (built in today).
// The kernel's requests for xts and ecb go to a modprobe that does not exist, so they are listed.
var Encryption = []string{"dm_mod", "dm_crypt", "ecb", "xts", "af_alg", "algif_skcipher", "tpm_tis", "tpm_crb"}

// Verity reads the payload through dm-verity (machined/internal/verity): its hash is SHA-256, which
// Debian's kernel builds in. dm_verity's own dependencies (dm_bufio, reed_solomon for its error
// correction) come with it.
var Verity = []string{"dm_mod", "dm_verity"}

// SoftWatchdog is the kernel's software watchdog (a timer in the kernel that restarts the machine),
// armed only on a machine with no hardware one: QEMU's microvm, many cloud VMs. It is not among the
// modules loaded behind the API, because the first watchdog the kernel registers becomes /dev/watchdog
// and the hardware's must be that one.
const SoftWatchdog = "softdog"

// ListName is the builder's list of shipped modules, in load order, in /lib/modules/RELEASE.
const ListName = "cairn.load"

// Loader loads module files.
type Loader struct {
	// File loads one module file with its parameters, no dependencies (modload.Load).
	File func(path, params string) error
	// Params are the kernel command line's module parameters and blacklist, read at each load (the
	// caller may replace them as its command line grows); nil loads every module, without parameters.
	Params *modload.Params
}

// LoadFiles loads module files in the given order (dependencies first), with their parameters, and
// returns the names of those the command line blacklists, which it leaves out. A module for hardware
// the machine lacks (ENODEV, ENXIO from its init) or one already loaded (EEXIST) is not an error; others
// are returned together, each with the parameters it was given.
func (l Loader) LoadFiles(dir string, rels []string) (loaded int, left []string, errs error) {
	var all []error
	for _, rel := range rels {
		var params string
		if l.Params != nil {
			if l.Params.Blacklisted(rel) {
				left = append(left, modload.ModuleName(rel))
				continue
			}
			params = l.Params.For(rel)
		}
		err := l.File(path.Join(dir, rel), params)
		switch {
		case err == nil:
			loaded++
		case errors.Is(err, syscall.EEXIST), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.ENXIO):
		case params != "":
			all = append(all, fmt.Errorf("load module %s with the command line's parameters %q: %w", rel, params, err))
		default:
			all = append(all, fmt.Errorf("load module %s: %w", rel, err))
		}
	}
	return loaded, left, errors.Join(all...)
}

// Index is the image's module metadata.
type Index struct {
	// Order is the load list: every shipped module's path (relative to the modules directory),
	// dependencies first.
	Order []string
	// Deps maps a module path to every path it needs (modules.dep lists the whole closure).
	Deps    map[string][]string
	Aliases Aliases
}

// ReadIndex reads the load list, modules.dep and modules.alias (optional: without it every driver
// counts as needed) from dir.
func ReadIndex(dir string) (*Index, error) {
	list, err := os.ReadFile(filepath.Join(dir, ListName))
	if err != nil {
		return nil, err
	}
	dep, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	alias, err := os.ReadFile(filepath.Join(dir, AliasName))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &Index{Order: Paths(list, nil), Deps: ParseDeps(dep), Aliases: ParseAliases(alias)}, nil
}

// ParseDeps reads modules.dep ("PATH: DEP DEP ...").
func ParseDeps(data []byte) map[string][]string {
	deps := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		p, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[strings.TrimSpace(p)] = strings.Fields(rest)
	}
	return deps
}

// Files returns the files that load the named modules, their dependencies included, in load order,
// leaving out the modules named in loaded (those the kernel has already). A name the image does not
// ship (built into the kernel, or not needed by it) adds nothing.
func (x *Index) Files(names, loaded []string) []string {
	want := map[string]bool{}
	for _, n := range names {
		want[norm(n)] = true
	}
	need := map[string]bool{}
	for _, rel := range x.Order {
		if want[norm(moduleName(rel))] {
			need[rel] = true
			for _, d := range x.Deps[rel] {
				need[d] = true
			}
		}
	}
	have := map[string]bool{}
	for _, n := range loaded {
		have[norm(n)] = true
	}
	var out []string
	for _, rel := range x.Order {
		if need[rel] && !have[norm(moduleName(rel))] {
			out = append(out, rel)
		}
	}
	return out
}

// Rest returns the files of every shipped module not in loaded, in load order, but SoftWatchdog's: that
// one is loaded only on a machine that turns out to have no hardware watchdog.
func (x *Index) Rest(loaded []string) []string {
	have := map[string]bool{SoftWatchdog: true}
	for _, n := range loaded {
		have[norm(n)] = true
	}
	var out []string
	for _, rel := range x.Order {
		if !have[norm(moduleName(rel))] {
			out = append(out, rel)
		}
	}
	return out
}

// Loaded reads the names of the loaded modules from /proc/modules' text.
func Loaded(procModules []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(procModules))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// Paths reads a load list and returns its module paths (relative to the modules directory), minus the
// modules named in skip (comparing - and _ alike, as the kernel does).
func Paths(list []byte, skip []string) []string {
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
