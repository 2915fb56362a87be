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

// DeviceAliases lists the modalias of every device on deviceBuses under sysRoot (/sys): what each device
// asks its driver to match. Devices of a bus appear only once the bus's own driver is loaded (virtio
// devices after virtio_pci), so callers read them again after loading one.
func DeviceAliases(sysRoot string) []string {
	var files []string
	for _, bus := range deviceBuses {
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
