// Package uki builds a unified kernel image: systemd's EFI stub (a PE32+ image, linuxx64.efi.stub from
// systemd-boot-efi) with sections appended that hold the os-release, the kernel command line, the kernel
// and the initramfs. The stub finds them by name when the firmware starts it.
//
// It is what the image builder did with objcopy --add-section, in Go, so that a node booted from the ISO,
// which has no objcopy, builds the same UKI when it installs itself onto a disk. From the same stub and
// inputs it writes the bytes objcopy 2.40 writes, but for the PE timestamp (the tests check it).
package uki

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// Section is one section to add: its name (at most 8 bytes, e.g. ".linux"), its size and its content.
// Build reads exactly Size bytes from Data and refuses a Data that ends sooner or goes on longer.
type Section struct {
	Name string
	Size int64
	Data io.Reader
}

// Options change what Build keeps from the stub.
type Options struct {
	// Timestamp, when set, replaces the stub's TimeDateStamp: the image builder puts SOURCE_DATE_EPOCH
	// there, so the UKI says when its sources were made. Unset, the stub's own stays.
	Timestamp *uint32
}

// sectionAlign is where each new section's virtual address starts: a multiple of 64 KiB after the stub's
// own sections. The loader maps every section at its address, so none may overlap whatever the kernel's
// and the initramfs's sizes; 64 KiB is what the image builder gave objcopy since the first UKI booted.
const sectionAlign = 0x10000

// newSectionFlags are the characteristics of an added section: initialized, read-only data, the flags
// objcopy's --set-section-flags NAME=data,readonly gives.
const newSectionFlags = pe.IMAGE_SCN_CNT_INITIALIZED_DATA | pe.IMAGE_SCN_MEM_READ

// Offsets in the PE headers, which Build patches in place so that every byte it does not mean to change
// stays the stub's. coff* are from the COFF file header (after "PE\0\0"), opt* from the PE32+ optional
// header.
const (
	sectionHeaderSize  = 40
	lfanewOffset       = 0x3c
	coffHeaderSize     = 20
	coffNumSections    = 2
	coffTimeDateStamp  = 4
	coffSymbolTable    = 8
	coffOptHeaderSize  = 16
	optMagic           = 0
	optSizeOfInitData  = 8
	optSizeOfImage     = 56
	optCheckSum        = 64
	optPE32PlusMinSize = 112 // the fixed fields, before the data directories
	pe32PlusMagic      = 0x20b
	securityDirectory  = 4 // the certificate table's data directory entry
)

// stub is what Build needs to know about a stub: where its headers are, where its sections end in
// memory and in the file, and what follows them.
type stub struct {
	b []byte
	// opt is the optional header's offset, table the section table's; tableEnd and headerEnd bound the
	// room for new section headers.
	coff, opt, table, tableEnd, headerEnd int
	nsections                             int
	fileAlign, sectAlign                  uint32
	initData, sizeOfImage                 uint32
	names                                 map[string]bool
	// vEnd is the end of the highest section in memory, rawEnd the end of the last section's data in
	// the file; anything after rawEnd is the COFF symbol table when hasSymbols.
	vEnd       uint64
	rawEnd     int
	hasSymbols bool
}

// parse checks that b is a PE32+ image Build can add sections to without losing any of its bytes.
func parse(b []byte) (*stub, error) {
	if len(b) < lfanewOffset+4 || b[0] != 'M' || b[1] != 'Z' {
		return nil, errors.New("not a PE image (no MZ header)")
	}
	peOff := int(binary.LittleEndian.Uint32(b[lfanewOffset:]))
	if peOff < 0 || peOff+4+coffHeaderSize > len(b) || !bytes.Equal(b[peOff:peOff+4], []byte("PE\x00\x00")) {
		return nil, errors.New("not a PE image (no PE signature where e_lfanew points)")
	}
	s := &stub{b: b, coff: peOff + 4}
	s.opt = s.coff + coffHeaderSize
	optSize := int(binary.LittleEndian.Uint16(b[s.coff+coffOptHeaderSize:]))
	if optSize < 2 || s.opt+optSize > len(b) {
		return nil, fmt.Errorf("optional header of %d bytes does not fit in the file", optSize)
	}
	if m := binary.LittleEndian.Uint16(b[s.opt+optMagic:]); m != pe32PlusMagic {
		return nil, fmt.Errorf("not PE32+: optional header magic %#x, want %#x (a 64-bit EFI image)", m, pe32PlusMagic)
	}
	if optSize < optPE32PlusMinSize {
		return nil, fmt.Errorf("PE32+ optional header of %d bytes, shorter than its %d fixed bytes", optSize, optPE32PlusMinSize)
	}
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		return nil, errors.New("not PE32+")
	}
	for _, a := range []uint32{oh.FileAlignment, oh.SectionAlignment} {
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("alignment %#x is not a power of two", a)
		}
	}
	s.fileAlign, s.sectAlign = oh.FileAlignment, oh.SectionAlignment
	s.initData, s.sizeOfImage = oh.SizeOfInitializedData, oh.SizeOfImage
	if len(oh.DataDirectory) > securityDirectory && oh.DataDirectory[securityDirectory].Size != 0 {
		// Its offset is a file offset and its signature covers the sections: both would be wrong after.
		d := oh.DataDirectory[securityDirectory]
		return nil, fmt.Errorf("signed: a certificate table of %d bytes at %#x, which adding sections would invalidate; use the unsigned stub", d.Size, d.VirtualAddress)
	}

	s.nsections = len(f.Sections)
	s.table = s.opt + optSize
	s.tableEnd = s.table + s.nsections*sectionHeaderSize
	s.headerEnd = int(oh.SizeOfHeaders)
	s.names = map[string]bool{}
	for _, sec := range f.Sections {
		s.names[sec.Name] = true
		s.vEnd = max(s.vEnd, uint64(sec.VirtualAddress)+uint64(sec.VirtualSize))
		if sec.Size == 0 {
			continue
		}
		end := int64(sec.Offset) + int64(sec.Size)
		if end > int64(len(b)) {
			return nil, fmt.Errorf("section %s's data (%#x to %#x) runs past the end of the file (%#x)", sec.Name, sec.Offset, end, len(b))
		}
		s.rawEnd = max(s.rawEnd, int(end))
		// New section headers must not overwrite a section's data either, whatever SizeOfHeaders says.
		s.headerEnd = min(s.headerEnd, int(sec.Offset))
	}
	s.rawEnd = max(s.rawEnd, int(oh.SizeOfHeaders))
	if s.rawEnd > len(b) {
		return nil, fmt.Errorf("SizeOfHeaders %#x is past the end of the file (%#x)", oh.SizeOfHeaders, len(b))
	}
	if err := s.checkTrailing(f.FileHeader); err != nil {
		return nil, err
	}
	return s, nil
}

// checkTrailing accepts what follows the sections' data only if Build can carry it over: nothing, or
// the COFF symbol table with its string table (which the Debian stub has: 362 symbols), which Build
// moves after the new sections as objcopy does. Anything else would be lost, or left pointing at the
// wrong place.
func (s *stub) checkTrailing(fh pe.FileHeader) error {
	rest := len(s.b) - s.rawEnd
	ptr := int64(fh.PointerToSymbolTable)
	if ptr == 0 {
		if rest > 0 {
			return fmt.Errorf("%d bytes after the sections' data (from %#x to the end of the file) that are no COFF symbol table (PointerToSymbolTable is 0) and would be lost", rest, s.rawEnd)
		}
		return nil
	}
	if ptr != int64(s.rawEnd) {
		return fmt.Errorf("COFF symbol table at %#x, not right after the sections' data (%#x): it cannot be moved after the new sections", ptr, s.rawEnd)
	}
	symLen := int64(fh.NumberOfSymbols) * pe.COFFSymbolSize
	if symLen+4 > int64(rest) {
		return fmt.Errorf("COFF symbol table of %d symbols at %#x runs past the end of the file", fh.NumberOfSymbols, ptr)
	}
	// The string table's size counts its own 4 bytes; some linkers write 0 for an empty one.
	strLen := max(int64(binary.LittleEndian.Uint32(s.b[s.rawEnd+int(symLen):])), 4)
	if symLen+strLen != int64(rest) {
		return fmt.Errorf("%d bytes after the sections' data at %#x, but the COFF symbol table there (%d symbols) and its string table (%d bytes) account for %d: the rest would be lost", rest, s.rawEnd, fh.NumberOfSymbols, strLen, symLen+strLen)
	}
	s.hasSymbols = true
	return nil
}

// check refuses sections the stub cannot take: bad names, empty data, no room for their headers.
func (s *stub) check(sections []Section) error {
	if len(sections) == 0 {
		return errors.New("no sections to add")
	}
	seen := map[string]bool{}
	for _, sec := range sections {
		switch {
		case sec.Name == "" || len(sec.Name) > 8 || strings.IndexByte(sec.Name, 0) >= 0:
			return fmt.Errorf("section name %q: want 1 to 8 bytes, no NUL", sec.Name)
		case s.names[sec.Name]:
			return fmt.Errorf("section %s: the stub has one already", sec.Name)
		case seen[sec.Name]:
			return fmt.Errorf("section %s: given twice", sec.Name)
		case sec.Size <= 0:
			// An empty kernel or initramfs is a caller's mistake, and the stub would not boot it.
			return fmt.Errorf("section %s is empty (size %d)", sec.Name, sec.Size)
		case sec.Data == nil:
			return fmt.Errorf("section %s has no data", sec.Name)
		}
		seen[sec.Name] = true
	}
	need := s.tableEnd + len(sections)*sectionHeaderSize
	if need > s.headerEnd {
		return fmt.Errorf("no room in the header area for %d more section headers: the section table ends at %#x, the headers at %#x (SizeOfHeaders, or the first section's data), %d bytes short",
			len(sections), s.tableEnd, s.headerEnd, need-s.headerEnd)
	}
	for i := s.tableEnd; i < need; i++ {
		if s.b[i] != 0 {
			return fmt.Errorf("the header area after the section table holds data at %#x, which new section headers would overwrite", i)
		}
	}
	return nil
}

// layout returns each new section's virtual address: after the stub's own sections (which end at
// stubEnd), in order, each aligned to 64 KiB so no two overlap however large the kernel and
// initramfs are.
func layout(stubEnd uint64, sizes []int64) []uint64 {
	next := alignUp(stubEnd, sectionAlign)
	vmas := make([]uint64, len(sizes))
	for i, s := range sizes {
		vmas[i] = next
		next = alignUp(next+uint64(s), sectionAlign)
	}
	return vmas
}

func alignUp[T int64 | uint64](v, align T) T {
	return (v + align - 1) &^ (align - 1)
}

// Build writes stub with sections appended to w: their headers after the stub's section table, their
// data after the stub's sections, each at a FileAlignment boundary and zero-padded to the next, and the
// stub's COFF symbol table, if it has one, after them. NumberOfSections, SizeOfInitializedData,
// SizeOfImage, PointerToSymbolTable and the CheckSum are updated; every other byte of the stub stays.
//
// w is a WriteSeeker because the CheckSum, in the headers written first, sums every byte after them:
// Build counts it while the sections stream through and seeks back to write its 4 bytes, so the kernel
// and the initramfs are read once and never held in memory. Build leaves w at the end of the UKI.
func Build(w io.WriteSeeker, stub []byte, sections []Section, opt Options) error {
	s, err := parse(stub)
	if err != nil {
		return fmt.Errorf("EFI stub: %w", err)
	}
	if err := s.check(sections); err != nil {
		return fmt.Errorf("EFI stub: %w", err)
	}
	start, err := w.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("UKI: %w", err)
	}

	sizes := make([]int64, len(sections))
	for i, sec := range sections {
		sizes[i] = sec.Size
	}
	vmas := layout(s.vEnd, sizes)
	hdr := slices.Clone(stub[:s.rawEnd])
	le := binary.LittleEndian
	fileAlign := int64(s.fileAlign)
	offsets := make([]int64, len(sections))
	off := alignUp(int64(s.rawEnd), fileAlign)
	initData := uint64(s.initData)
	for i, sec := range sections {
		raw := alignUp(sec.Size, fileAlign)
		end := vmas[i] + uint64(sec.Size)
		if end > math.MaxUint32 || off+raw > math.MaxUint32 {
			return fmt.Errorf("section %s: the UKI would be larger than a PE image's 4 GiB", sec.Name)
		}
		offsets[i] = off
		h := hdr[s.tableEnd+i*sectionHeaderSize:][:sectionHeaderSize]
		copy(h[0:8], sec.Name)
		le.PutUint32(h[8:], uint32(sec.Size)) // VirtualSize: the stub reads no more than the data
		le.PutUint32(h[12:], uint32(vmas[i]))
		le.PutUint32(h[16:], uint32(raw))
		le.PutUint32(h[20:], uint32(off))
		le.PutUint32(h[36:], newSectionFlags)
		initData += uint64(raw)
		off += raw
	}
	last := len(sections) - 1
	sizeOfImage := max(uint64(s.sizeOfImage), alignUp(vmas[last]+uint64(sections[last].Size), uint64(s.sectAlign)))
	if sizeOfImage > math.MaxUint32 || initData > math.MaxUint32 || off+int64(len(stub)-s.rawEnd) > math.MaxUint32 {
		return errors.New("the UKI would be larger than a PE image's 4 GiB")
	}
	le.PutUint16(hdr[s.coff+coffNumSections:], uint16(s.nsections+len(sections)))
	if opt.Timestamp != nil {
		le.PutUint32(hdr[s.coff+coffTimeDateStamp:], *opt.Timestamp)
	}
	if s.hasSymbols {
		le.PutUint32(hdr[s.coff+coffSymbolTable:], uint32(off))
	}
	le.PutUint32(hdr[s.opt+optSizeOfInitData:], uint32(initData))
	le.PutUint32(hdr[s.opt+optSizeOfImage:], uint32(sizeOfImage))
	le.PutUint32(hdr[s.opt+optCheckSum:], 0) // counted as 0, then written once the sum is known

	cw := &checksumWriter{w: w}
	if _, err := cw.Write(hdr); err != nil {
		return fmt.Errorf("write UKI: %w", err)
	}
	for i, sec := range sections {
		if err := writeZeros(cw, offsets[i]-cw.n); err != nil {
			return fmt.Errorf("write UKI: %w", err)
		}
		if err := copySection(cw, sec); err != nil {
			return err
		}
	}
	if err := writeZeros(cw, off-cw.n); err != nil {
		return fmt.Errorf("write UKI: %w", err)
	}
	if _, err := cw.Write(stub[s.rawEnd:]); err != nil {
		return fmt.Errorf("write UKI: %w", err)
	}
	var sum [4]byte
	le.PutUint32(sum[:], cw.sum())
	if _, err := w.Seek(start+int64(s.opt+optCheckSum), io.SeekStart); err != nil {
		return fmt.Errorf("UKI checksum: %w", err)
	}
	if _, err := w.Write(sum[:]); err != nil {
		return fmt.Errorf("UKI checksum: %w", err)
	}
	if _, err := w.Seek(start+cw.n, io.SeekStart); err != nil {
		return fmt.Errorf("UKI checksum: %w", err)
	}
	return nil
}

// copySection writes exactly sec.Size bytes of sec.Data, and makes sure there were no more: a file that
// changed between its Stat and its read would otherwise make a UKI whose section lies about its content.
func copySection(w io.Writer, sec Section) error {
	n, err := io.CopyN(w, sec.Data, sec.Size)
	if err == io.EOF {
		return fmt.Errorf("section %s: its data ended after %d of its %d bytes", sec.Name, n, sec.Size)
	}
	if err != nil {
		return fmt.Errorf("section %s: %w", sec.Name, err)
	}
	var one [1]byte
	switch _, err := io.ReadFull(sec.Data, one[:]); err {
	case io.EOF:
		return nil
	case nil:
		return fmt.Errorf("section %s: its data is longer than its size, %d bytes", sec.Name, sec.Size)
	default:
		return fmt.Errorf("section %s: %w", sec.Name, err)
	}
}

func writeZeros(w io.Writer, n int64) error {
	var zeros [4096]byte
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// checksumWriter passes writes on to w and sums them for the PE image checksum: the file as
// little-endian 16-bit words (a last odd byte as the low half of one), added with the carries folded
// back in, plus the file's length. The CheckSum field itself must be written as 0. Firmware that checks
// it would refuse the UKI otherwise.
type checksumWriter struct {
	w io.Writer
	n int64 // bytes written
	// acc holds the words' sum unfolded: folding once at the end gives what folding after each word
	// would, and 2^48 words cannot overflow it.
	acc uint64
	odd bool // a word's low byte, lo, waits for its high byte
	lo  byte
}

func (c *checksumWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	q := p[:n]
	c.n += int64(n)
	if c.odd && len(q) > 0 {
		c.acc += uint64(c.lo) | uint64(q[0])<<8
		q, c.odd = q[1:], false
	}
	for len(q) >= 2 {
		c.acc += uint64(binary.LittleEndian.Uint16(q))
		q = q[2:]
	}
	if len(q) == 1 {
		c.lo, c.odd = q[0], true
	}
	return n, err
}

func (c *checksumWriter) sum() uint32 {
	s := c.acc
	if c.odd {
		s += uint64(c.lo)
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint32(s) + uint32(c.n)
}

// OSRelease is the UKI's .osrel section. It has no ID= nor IMAGE_ID= on purpose: systemd-boot 252 sorts
// the UKIs that carry a sort key (IMAGE_ID, else ID) by their VERSION, while Cairn needs them sorted by
// file name, whose generation it controls (api/upgrade). Measured: with ID=cairn, systemd-boot booted
// the entry with the higher VERSION although its name sorted lower; without an ID it boots the highest
// generation, and a counted "+1" entry whose try is used up falls back to the other slot's entry.
func OSRelease(version string) string {
	return fmt.Sprintf("NAME=Cairn\nVERSION=%s\nVERSION_ID=%s\nPRETTY_NAME=\"Cairn %s\"\n", version, version, version)
}

// Inputs are a UKI's parts as the image builder and a node installing from the ISO have them: the stub,
// the kernel and the initramfs as files, the command line and the version as text.
type Inputs struct {
	// Stub is systemd's linuxx64.efi.stub; on the ISO, api/upgrade.ISOStub.
	Stub string
	// Kernel is the bzImage, Initramfs the initramfs; each is read once, as it is written.
	Kernel, Initramfs string
	// Cmdline is the kernel command line (.cmdline holds it followed by one NUL byte, as the stub
	// expects a C string); Version goes into OSRelease.
	Cmdline, Version string
}

// Sections, in the order they are added: the names the stub looks for.
const (
	OSRelSection     = ".osrel"
	CmdlineSection   = ".cmdline"
	KernelSection    = ".linux"
	InitramfsSection = ".initrd"
)

// BuildFiles writes the UKI of in to out. It writes out+".tmp", syncs it and renames it, so an
// interrupted build or a power cut never leaves a truncated UKI under the final name (on the ESP, that
// would be a boot entry that does not boot).
func BuildFiles(out string, in Inputs, opt Options) (err error) {
	stubImage, err := os.ReadFile(in.Stub)
	if err != nil {
		return fmt.Errorf("EFI stub: %w", err)
	}
	osrel, cmdline := OSRelease(in.Version), in.Cmdline+"\x00"
	sections := []Section{
		{Name: OSRelSection, Size: int64(len(osrel)), Data: strings.NewReader(osrel)},
		{Name: CmdlineSection, Size: int64(len(cmdline)), Data: strings.NewReader(cmdline)},
	}
	for _, f := range []struct{ name, path string }{{KernelSection, in.Kernel}, {InitramfsSection, in.Initramfs}} {
		r, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("UKI section %s: %w", f.name, err)
		}
		defer r.Close()
		fi, err := r.Stat()
		if err != nil {
			return fmt.Errorf("UKI section %s: %w", f.name, err)
		}
		sections = append(sections, Section{Name: f.name, Size: fi.Size(), Data: r})
	}

	tmp := out + ".tmp"
	w, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.Close()
			os.Remove(tmp)
		}
	}()
	if err := Build(w, stubImage, sections, opt); err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	if err := w.Sync(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}
