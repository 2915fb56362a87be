package modules

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// AliasName is the kernel's table of device patterns per module (modules.alias), in /lib/modules/RELEASE.
const AliasName = "modules.alias"

// Aliases are the device patterns of modules.alias by module name (- and _ alike).
type Aliases map[string][]string

// ParseAliases reads modules.alias: "alias PATTERN MODULE" lines; anything else is skipped.
func ParseAliases(data []byte) Aliases {
	a := Aliases{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "alias" {
			continue
		}
		m := norm(f[2])
		a[m] = append(a[m], f[1])
	}
	return a
}

// Present returns, in their order, the candidates that a device on the machine needs: those with an
// alias matching one of the devices' modaliases. A candidate without any alias is kept: with nothing to
// tell it by, it loads, since a disk driver left out by mistake would make a configured node look fresh.
// It is for device drivers only: a module known by other aliases ("fs-xfs", "crypto-crc32c") matches no
// device and is left out.
func (a Aliases) Present(candidates, devices []string) []string {
	var out []string
	for _, c := range candidates {
		pats, ok := a[norm(c)]
		if !ok || matchAny(pats, devices) {
			out = append(out, c)
		}
	}
	return out
}

// Absent is the other candidates: those no device on the machine needs now.
func (a Aliases) Absent(candidates, devices []string) []string {
	present := map[string]bool{}
	for _, p := range a.Present(candidates, devices) {
		present[p] = true
	}
	var out []string
	for _, c := range candidates {
		if !present[c] {
			out = append(out, c)
		}
	}
	return out
}

func matchAny(patterns, devices []string) bool {
	for _, p := range patterns {
		// Most patterns name their bus before the first wildcard ("pci:v00008086d...", "acpi*:..."):
		// comparing that much first keeps the full match for the few that can match.
		lit := p
		if i := strings.IndexAny(p, "*?["); i >= 0 {
			lit = p[:i]
		}
		for _, d := range devices {
			if !strings.HasPrefix(d, lit) {
				continue
			}
			// modules.alias patterns are shell globs, as kmod matches them; path.Match is the same
			// syntax, and a modalias holds no '/' for it to treat specially.
			if ok, err := path.Match(p, d); err == nil && ok {
				return true
			}
		}
	}
	return false
}

// Buses whose devices the boot's drivers bind to: PCI (NICs, disk controllers, virtio's PCI transport),
// ACPI and platform devices (virtio's MMIO transport, fw_cfg; device-tree "of:" aliases match platform
// devices too), virtio devices, and SCSI devices (the disks behind SATA and virtio-scsi controllers).
// Reading only these keeps each look short: sysfs lists hundreds of devices on other buses (memory
// blocks, CPUs, ...) that none of these drivers match.
var deviceBuses = []string{"pci", "acpi", "platform", "virtio", "scsi"}

// modaliasBuses are, for each type a device's modalias starts with ("pci:...", "acpi:..."), the buses of
// deviceBuses whose devices have it: the kernel gives a platform device the modalias of its firmware
// node ("acpi:" or "of:") when it has one, "platform:" otherwise. No device on deviceBuses has a modalias
// of another type, so an alias of another type ("block-major-8-*", "fs-xfs") matches none of them.
var modaliasBuses = map[string][]string{
	"pci": {"pci"}, "virtio": {"virtio"}, "scsi": {"scsi"},
	"acpi": {"acpi", "platform"}, "of": {"platform"}, "platform": {"platform"},
}

// Buses are the buses of deviceBuses (in that order) whose devices the candidates' aliases can match:
// all of them for a pattern that does not name its type before a wildcard. Each look at the devices
// reads one sysfs file per device, tens of milliseconds under emulation on the boot's path, so a set of
// drivers looks only where its devices can be: the SCSI disks' drivers do not read the ACPI namespace.
func (a Aliases) Buses(candidates []string) []string {
	want := map[string]bool{}
	for _, c := range candidates {
		for _, p := range a[norm(c)] {
			typ := p
			if i := strings.IndexAny(p, ":*?["); i >= 0 {
				typ = p[:i]
			}
			if typ == "" {
				return deviceBuses
			}
			for _, b := range modaliasBuses[typ] {
				want[b] = true
			}
		}
	}
	var out []string
	for _, b := range deviceBuses {
		if want[b] {
			out = append(out, b)
		}
	}
	return out
}

// DeviceAliases lists the modalias of every device on buses (some of deviceBuses) under sysRoot (/sys):
// what each device asks its driver to match. Devices of a bus appear only once the bus's own driver is
// loaded (virtio devices after virtio_pci), so callers read them again after loading one.
func DeviceAliases(sysRoot string, buses []string) []string {
	var files []string
	for _, bus := range buses {
		f, _ := filepath.Glob(filepath.Join(sysRoot, "bus", bus, "devices", "*", "modalias"))
		files = append(files, f...)
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if s := strings.TrimSpace(string(b)); s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func norm(s string) string { return strings.ReplaceAll(s, "-", "_") }
