// Package kernel finds the kernel the image ships and turns its bzImage into the uncompressed PVH ELF
// that QEMU boots directly: decompressing an xz bzImage costs ~3 s under TCG at every boot.
package kernel

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Kernel is one installed kernel.
type Kernel struct {
	Version string // uname -r, e.g. 6.1.0-56-amd64
	Image   string // the bzImage, /boot/vmlinuz-VERSION
	Config  string // /boot/config-VERSION (may not exist)
	Modules string // /lib/modules/VERSION
}

// Find returns the newest kernel under root ("/" on the build host) that has both a vmlinuz and its
// modules. Versions sort by their numeric parts, so 6.10 is newer than 6.9.
func Find(root string) (Kernel, error) {
	images, err := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if err != nil {
		return Kernel{}, err
	}
	var found []Kernel
	for _, img := range images {
		v := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		k := Kernel{
			Version: v,
			Image:   img,
			Config:  filepath.Join(root, "boot", "config-"+v),
			Modules: filepath.Join(root, "lib", "modules", v),
		}
		if _, err := os.Stat(filepath.Join(k.Modules, "modules.dep")); err == nil {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return Kernel{}, fmt.Errorf("no kernel with modules under %s (install linux-image-amd64)", filepath.Join(root, "boot"))
	}
	sort.Slice(found, func(i, j int) bool { return versionLess(found[i].Version, found[j].Version) })
	return found[len(found)-1], nil
}

// versionLess compares dotted/dashed versions number by number, falling back to text.
func versionLess(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' })
	}
	pa, pb := split(a), split(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		var na, nb int
		_, ea := fmt.Sscanf(pa[i], "%d", &na)
		_, eb := fmt.Sscanf(pb[i], "%d", &nb)
		if ea == nil && eb == nil && na != nb {
			return na < nb
		}
		if (ea != nil || eb != nil) && pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}

// Payload returns the compressed kernel inside a bzImage, using the boot protocol header (2.08+):
// payload_offset and payload_length are relative to the protected-mode code after the setup sectors.
func Payload(bz []byte) ([]byte, error) {
	if len(bz) < 0x250 || string(bz[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS boot header)")
	}
	if v := binary.LittleEndian.Uint16(bz[0x206:]); v < 0x208 {
		return nil, fmt.Errorf("boot protocol %#x has no payload fields (need 2.08)", v)
	}
	setup := int(bz[0x1F1])
	if setup == 0 {
		setup = 4
	}
	start := (setup+1)*512 + int(binary.LittleEndian.Uint32(bz[0x248:]))
	end := start + int(binary.LittleEndian.Uint32(bz[0x24C:]))
	if start >= end || end > len(bz) {
		return nil, fmt.Errorf("payload %d..%d lies outside the %d-byte image", start, end, len(bz))
	}
	return bz[start:end], nil
}

// ExtractVmlinux decompresses a bzImage's payload and checks that it is an x86-64 ELF that QEMU can
// boot through PVH.
func ExtractVmlinux(bz []byte) ([]byte, error) {
	p, err := Payload(bz)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(p, xzMagic) {
		return nil, fmt.Errorf("payload compression % x is not supported (only xz, Debian's choice)", p[:min(len(p), 6)])
	}
	out, err := decompressXZ(p)
	if err != nil {
		return nil, fmt.Errorf("decompress payload: %w", err)
	}
	if err := CheckPVH(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Xen's XEN_ELFNOTE_PHYS32_ENTRY: the 32-bit entry point PVH boot jumps to.
const xenElfNotePhys32Entry = 18

// CheckPVH returns an error unless img is an x86-64 ELF carrying the Xen PVH entry note.
func CheckPVH(img []byte) error {
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return fmt.Errorf("vmlinux is not an ELF: %w", err)
	}
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("vmlinux is for %v, want x86-64", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		data := make([]byte, p.Filesz)
		if _, err := p.ReadAt(data, 0); err != nil {
			return fmt.Errorf("vmlinux note segment: %w", err)
		}
		if hasNote(data, "Xen", xenElfNotePhys32Entry) {
			return nil
		}
	}
	return errors.New("vmlinux has no PVH entry note (kernel built without CONFIG_PVH)")
}

// hasNote walks ELF notes (namesz, descsz, type, name, desc; each padded to 4 bytes).
func hasNote(data []byte, name string, typ uint32) bool {
	for len(data) >= 12 {
		nsz := binary.LittleEndian.Uint32(data[0:])
		dsz := binary.LittleEndian.Uint32(data[4:])
		t := binary.LittleEndian.Uint32(data[8:])
		nEnd := 12 + int(nsz+3)&^3
		dEnd := nEnd + int(dsz+3)&^3
		if nEnd > len(data) || dEnd > len(data) {
			return false
		}
		if t == typ && nsz > 0 && string(bytes.TrimRight(data[12:12+nsz], "\x00")) == name {
			return true
		}
		data = data[dEnd:]
	}
	return false
}
