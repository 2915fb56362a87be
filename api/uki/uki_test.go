package uki

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// realStub is systemd's stub (package systemd-boot-efi), which the image builder uses.
const realStub = "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"

func readRealStub(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(realStub)
	if err != nil {
		t.Skipf("no systemd EFI stub on this host (install systemd-boot-efi): %v", err)
	}
	return b
}

// Offsets in minimalStub, whose PE header is at 0x40.
const (
	minCOFF     = 0x44
	minOpt      = minCOFF + 20
	minTableEnd = minOpt + 240 + 2*40
)

// minimalStub is a two-section PE32+ image laid out like a linker would, so the rules are tested on
// any host, with or without systemd's stub. symbols gives it a COFF symbol table and string table
// after its sections, as the Debian stub has.
func minimalStub(t *testing.T, symbols bool) []byte {
	t.Helper()
	var b bytes.Buffer
	dos := make([]byte, 0x40)
	copy(dos, "MZ")
	binary.LittleEndian.PutUint32(dos[0x3c:], 0x40)
	b.Write(dos)
	b.WriteString("PE\x00\x00")
	fh := pe.FileHeader{Machine: pe.IMAGE_FILE_MACHINE_AMD64, NumberOfSections: 2, TimeDateStamp: 0x11223344,
		SizeOfOptionalHeader: 240, Characteristics: 0x206}
	if symbols {
		fh.PointerToSymbolTable, fh.NumberOfSymbols = 0x800, 2
	}
	oh := pe.OptionalHeader64{Magic: 0x20b, SizeOfCode: 0x200, SizeOfInitializedData: 0x200, AddressOfEntryPoint: 0x1000,
		BaseOfCode: 0x1000, SectionAlignment: 0x1000, FileAlignment: 0x200, SizeOfImage: 0x3000, SizeOfHeaders: 0x400,
		Subsystem: pe.IMAGE_SUBSYSTEM_EFI_APPLICATION, NumberOfRvaAndSizes: 16}
	sh := []pe.SectionHeader32{
		{Name: [8]byte{'.', 't', 'e', 'x', 't'}, VirtualSize: 0x10, VirtualAddress: 0x1000, SizeOfRawData: 0x200, PointerToRawData: 0x400, Characteristics: 0x60000020},
		{Name: [8]byte{'.', 'd', 'a', 't', 'a'}, VirtualSize: 0x21, VirtualAddress: 0x2000, SizeOfRawData: 0x200, PointerToRawData: 0x600, Characteristics: 0xc0000040},
	}
	for _, v := range []any{fh, oh, sh} {
		if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	img := make([]byte, 0x800)
	copy(img, b.Bytes())
	copy(img[0x400:], "\xc3 text section")
	copy(img[0x600:], "data section of 0x21 bytes, odd.")
	if symbols {
		sym := make([]byte, 2*pe.COFFSymbolSize)
		copy(sym, "sym1")
		copy(sym[pe.COFFSymbolSize:], "\x00\x00\x00\x00\x04\x00\x00\x00") // a long name: string table offset 4
		img = append(img, sym...)
		img = binary.LittleEndian.AppendUint32(img, uint32(4+len("a_long_symbol_name\x00")))
		img = append(img, "a_long_symbol_name\x00"...)
	}
	setChecksum(img)
	return img
}

// refChecksum is the PE checksum computed as the format describes it, a word at a time, to check the
// streaming one against.
func refChecksum(b []byte) uint32 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.LittleEndian.Uint16(b[i:]))
		sum = (sum & 0xffff) + (sum >> 16)
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1])
		sum = (sum & 0xffff) + (sum >> 16)
	}
	return sum + uint32(len(b))
}

func checksumOffset(b []byte) int {
	return int(binary.LittleEndian.Uint32(b[0x3c:])) + 24 + 64
}

// storedAndComputed returns the checksum in an image's header and the one its bytes give.
func storedAndComputed(b []byte) (stored, computed uint32) {
	c := bytes.Clone(b)
	at := checksumOffset(c)
	stored = binary.LittleEndian.Uint32(c[at:])
	binary.LittleEndian.PutUint32(c[at:], 0)
	return stored, refChecksum(c)
}

func setChecksum(b []byte) {
	_, sum := storedAndComputed(b)
	binary.LittleEndian.PutUint32(b[checksumOffset(b):], sum)
}

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stubEnd uint64
		sizes   []int64
		want    []uint64
	}{
		// The Debian stub's sections end at 0x19134.
		{"debian stub", 0x19134, []int64{100, 20, 8_000_000, 0x10000}, []uint64{0x20000, 0x30000, 0x40000, 0x7f0000}},
		{"stub ends on a boundary", 0x20000, []int64{0x10000, 1}, []uint64{0x20000, 0x30000}},
		{"one byte over", 0x20001, []int64{0x10001, 1}, []uint64{0x30000, 0x50000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := layout(tc.stubEnd, tc.sizes)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("layout() (-want +got):\n%s", diff)
			}
		})
	}
}

// The checksum must match what the toolchain stored in systemd's stub, or firmware that checks it would
// refuse our UKI.
func TestChecksumMatchesStub(t *testing.T) {
	b := readRealStub(t)
	stored, _ := storedAndComputed(b)
	if stored == 0 {
		t.Skip("stub carries no checksum")
	}
	binary.LittleEndian.PutUint32(b[checksumOffset(b):], 0)
	cw := &checksumWriter{w: io.Discard}
	cw.Write(b)
	if got := cw.sum(); got != stored {
		t.Errorf("checksum(stub) = %#x, want the stored %#x", got, stored)
	}
}

// Sections stream in writes of any length, odd ones included: the sum must not depend on where they
// split the words.
func TestChecksumWriterSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 4097, 100_000, 100_001} {
		data := randomBytes(uint64(n), n)
		var out bytes.Buffer
		cw := &checksumWriter{w: &out}
		for p := data; len(p) > 0; {
			k := min(len(p), 1+rng.IntN(7))
			cw.Write(p[:k])
			p = p[k:]
		}
		if got, want := cw.sum(), refChecksum(data); got != want {
			t.Errorf("%d bytes: checksum = %#x, want %#x", n, got, want)
		}
		if !bytes.Equal(out.Bytes(), data) || cw.n != int64(n) {
			t.Errorf("%d bytes: checksumWriter passed on %d bytes, counted %d", n, out.Len(), cw.n)
		}
	}
}

// fakeSection is a section's name and content for a test.
type fakeSection struct {
	name string
	data []byte
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// ukiSections are the four sections of a UKI, with a kernel and initramfs of the given sizes.
func ukiSections(kernel, initrd int) []fakeSection {
	return []fakeSection{
		{".osrel", []byte(OSRelease("v0.0.0-test"))},
		{".cmdline", []byte("console=ttyS0 panic=10\x00")},
		{".linux", randomBytes(1, kernel)},
		{".initrd", randomBytes(2, initrd)},
	}
}

// build runs Build into a file, the way BuildFiles does, and returns what it wrote. wrap changes each
// section's reader.
func build(t *testing.T, stub []byte, secs []fakeSection, opt Options, wrap func(io.Reader) io.Reader) ([]byte, error) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "uki.efi"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sections []Section
	for _, s := range secs {
		var r io.Reader = bytes.NewReader(s.data)
		if wrap != nil {
			r = wrap(r)
		}
		sections = append(sections, Section{Name: s.name, Size: int64(len(s.data)), Data: r})
	}
	if err := Build(f, stub, sections, opt); err != nil {
		return nil, err
	}
	end, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if end != int64(len(b)) {
		t.Errorf("Build left the file at %d, not at its end %d", end, len(b))
	}
	return b, nil
}

func openPE(t *testing.T, b []byte) *pe.File {
	t.Helper()
	f, err := pe.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PE image any more: %v", err)
	}
	return f
}

func sectionData(t *testing.T, s *pe.Section) []byte {
	t.Helper()
	b, err := s.Data()
	if err != nil {
		t.Fatalf("section %s: %v", s.Name, err)
	}
	return b
}

func TestBuild(t *testing.T) {
	stubs := map[string]func(t *testing.T) []byte{
		"minimal":              func(t *testing.T) []byte { return minimalStub(t, false) },
		"minimal with symbols": func(t *testing.T) []byte { return minimalStub(t, true) },
		"systemd":              readRealStub,
	}
	cases := []struct {
		name     string
		sections []fakeSection
		wrap     func(io.Reader) io.Reader
	}{
		{"small", ukiSections(12, 15), nil},
		// Odd sizes, a kernel larger than the 64 KiB step and a file alignment, read a byte at a time
		// or in halves: padding and the checksum must not depend on how the data arrives.
		{"odd sizes, one byte at a time", ukiSections(200_001, 3), iotest.OneByteReader},
		{"large, half reads", ukiSections(1<<20+7, 3<<20+1), iotest.HalfReader},
		{"one section", []fakeSection{{".linux", randomBytes(3, 0x10000)}}, nil},
	}
	for stubName, load := range stubs {
		for _, tc := range cases {
			t.Run(stubName+"/"+tc.name, func(t *testing.T) {
				stub := load(t)
				out, err := build(t, stub, tc.sections, Options{}, tc.wrap)
				if err != nil {
					t.Fatal(err)
				}
				checkUKI(t, stub, out, tc.sections, Options{})
			})
		}
	}
}

// checkUKI checks out is stub with secs added by the rules of Build, given opt.
func checkUKI(t *testing.T, stub, out []byte, secs []fakeSection, opt Options) {
	t.Helper()
	in, got := openPE(t, stub), openPE(t, out)
	inOH, gotOH := in.OptionalHeader.(*pe.OptionalHeader64), got.OptionalHeader.(*pe.OptionalHeader64)
	if len(got.Sections) != len(in.Sections)+len(secs) {
		t.Fatalf("%d sections, want the stub's %d and %d new", len(got.Sections), len(in.Sections), len(secs))
	}

	var stubEnd uint64
	for i, s := range in.Sections {
		g := got.Sections[i]
		if diff := cmp.Diff(s.SectionHeader, g.SectionHeader); diff != "" {
			t.Errorf("stub section %s's header changed (-stub +UKI):\n%s", s.Name, diff)
		}
		if !bytes.Equal(sectionData(t, s), sectionData(t, g)) {
			t.Errorf("stub section %s's data changed", s.Name)
		}
		stubEnd = max(stubEnd, uint64(s.VirtualAddress)+uint64(s.VirtualSize))
	}

	prevEnd, prevRaw := stubEnd, int64(0)
	var rawSum uint32
	for i, want := range secs {
		g := got.Sections[len(in.Sections)+i]
		va := uint64(g.VirtualAddress)
		switch {
		case g.Name != want.name:
			t.Errorf("new section %d is %q, want %q", i, g.Name, want.name)
		case g.VirtualSize != uint32(len(want.data)):
			t.Errorf("section %s: VirtualSize %d, want %d", g.Name, g.VirtualSize, len(want.data))
		case va%0x10000 != 0 || va < prevEnd || va-prevEnd >= 0x10000:
			t.Errorf("section %s at %#x: want the first 64 KiB boundary at or after %#x", g.Name, va, prevEnd)
		case g.Size%inOH.FileAlignment != 0 || g.Offset%inOH.FileAlignment != 0 || g.Size-g.VirtualSize >= inOH.FileAlignment:
			t.Errorf("section %s: data at %#x, %#x bytes: want both aligned to %#x", g.Name, g.Offset, g.Size, inOH.FileAlignment)
		case int64(g.Offset) < prevRaw:
			t.Errorf("section %s: data at %#x overlaps what comes before (to %#x)", g.Name, g.Offset, prevRaw)
		case g.Characteristics != 0x40000040:
			t.Errorf("section %s: characteristics %#x, want initialized read-only data 0x40000040", g.Name, g.Characteristics)
		}
		d := sectionData(t, g)
		if !bytes.Equal(d[:g.VirtualSize], want.data) {
			t.Errorf("section %s: data differs from its input", g.Name)
		}
		if bytes.ContainsFunc(d[g.VirtualSize:], func(r rune) bool { return r != 0 }) {
			t.Errorf("section %s: padding is not zeros", g.Name)
		}
		prevEnd, prevRaw = va+uint64(g.VirtualSize), int64(g.Offset)+int64(g.Size)
		rawSum += g.Size
	}
	if uint64(gotOH.SizeOfImage) < prevEnd || gotOH.SizeOfImage%gotOH.SectionAlignment != 0 {
		t.Errorf("SizeOfImage %#x: want a multiple of %#x covering the last section's end %#x", gotOH.SizeOfImage, gotOH.SectionAlignment, prevEnd)
	}
	if gotOH.SizeOfInitializedData != inOH.SizeOfInitializedData+rawSum {
		t.Errorf("SizeOfInitializedData %#x, want the stub's %#x + the new sections' %#x", gotOH.SizeOfInitializedData, inOH.SizeOfInitializedData, rawSum)
	}
	stored, computed := storedAndComputed(out)
	if stored != computed {
		t.Errorf("CheckSum %#x, but the UKI's bytes give %#x", stored, computed)
	}

	// Every other header field is the stub's.
	wantOH := *inOH
	wantOH.SizeOfImage, wantOH.SizeOfInitializedData, wantOH.CheckSum = gotOH.SizeOfImage, gotOH.SizeOfInitializedData, gotOH.CheckSum
	if diff := cmp.Diff(wantOH, *gotOH); diff != "" {
		t.Errorf("optional header (-want +got):\n%s", diff)
	}
	wantFH := in.FileHeader
	wantFH.NumberOfSections = uint16(len(in.Sections) + len(secs))
	if opt.Timestamp != nil {
		wantFH.TimeDateStamp = *opt.Timestamp
	}
	if in.FileHeader.PointerToSymbolTable != 0 {
		wantFH.PointerToSymbolTable = uint32(prevRaw)
	}
	if diff := cmp.Diff(wantFH, got.FileHeader); diff != "" {
		t.Errorf("file header (-want +got):\n%s", diff)
	}
	// The symbol table moved after the new sections, unchanged, to the end of the file.
	if p := in.FileHeader.PointerToSymbolTable; p != 0 {
		if !bytes.Equal(stub[p:], out[prevRaw:]) {
			t.Errorf("the stub's symbol table (%d bytes) is not what follows the new sections", len(stub)-int(p))
		}
		if diff := cmp.Diff(in.COFFSymbols, got.COFFSymbols); diff != "" {
			t.Errorf("COFF symbols (-stub +UKI):\n%s", diff)
		}
	} else if int64(len(out)) != prevRaw {
		t.Errorf("UKI is %d bytes, want it to end with the last section's data at %d", len(out), prevRaw)
	}
}

func TestTimestamp(t *testing.T) {
	stub := minimalStub(t, false)
	secs := ukiSections(10, 10)
	epoch := uint32(1700000000)
	for _, tc := range []struct {
		name string
		opt  Options
		want uint32
	}{
		{"kept", Options{}, 0x11223344},
		{"set", Options{Timestamp: &epoch}, epoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := build(t, stub, secs, tc.opt, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := openPE(t, out).FileHeader.TimeDateStamp; got != tc.want {
				t.Errorf("TimeDateStamp = %#x, want %#x", got, tc.want)
			}
			if stored, computed := storedAndComputed(out); stored != computed {
				t.Errorf("CheckSum %#x, but the UKI's bytes give %#x", stored, computed)
			}
		})
	}
}

func TestBuildRefuses(t *testing.T) {
	le := binary.LittleEndian
	for _, tc := range []struct {
		name     string
		stub     func(b []byte) []byte // changes minimalStub(t, false)
		sections []Section
		want     string
	}{
		{"not PE", func([]byte) []byte {
			return []byte("#!/bin/sh\necho not an EFI image\n...........................................")
		}, nil, "not a PE image"},
		{"PE32", func(b []byte) []byte { le.PutUint16(b[minOpt:], 0x10b); return b }, nil, "not PE32+: optional header magic 0x10b"},
		{"trailing bytes", func(b []byte) []byte { return append(b, "appended"...) }, nil,
			"8 bytes after the sections' data (from 0x800 to the end of the file) that are no COFF symbol table"},
		{"certificate table", func(b []byte) []byte {
			le.PutUint32(b[minOpt+112+4*8:], uint32(len(b)))
			le.PutUint32(b[minOpt+112+4*8+4:], 16)
			return append(b, make([]byte, 16)...)
		}, nil, "signed: a certificate table of 16 bytes at 0x800"},
		{"bytes after the symbol table", func(b []byte) []byte {
			le.PutUint32(b[minCOFF+8:], 0x800)
			le.PutUint32(b[minCOFF+12:], 1)
			b = append(b, make([]byte, pe.COFFSymbolSize)...)
			b = le.AppendUint32(b, 4)
			return append(b, "junk"...)
		}, nil, "COFF symbol table there (1 symbols) and its string table (4 bytes) account for 22"},
		{"symbol table elsewhere", func(b []byte) []byte {
			le.PutUint32(b[minCOFF+8:], 0x600)
			le.PutUint32(b[0x600:], 4) // an empty string table, so that debug/pe reads it
			return b
		}, nil, "COFF symbol table at 0x600, not right after the sections' data (0x800)"},
		{"no header room", func(b []byte) []byte {
			le.PutUint32(b[minOpt+60:], minTableEnd+2*40)
			return b
		}, nil, "no room in the header area for 4 more section headers"},
		{"data after the section table", func(b []byte) []byte {
			b[minTableEnd+100] = 1
			return b
		}, nil, fmt.Sprintf("holds data at %#x", minTableEnd+100)},
		{"name too long", nil, []Section{{".initramfs", 1, strings.NewReader("x")}}, `section name ".initramfs"`},
		{"name in the stub", nil, []Section{{".text", 1, strings.NewReader("x")}}, "section .text: the stub has one already"},
		{"name twice", nil, []Section{{".linux", 1, strings.NewReader("x")}, {".linux", 1, strings.NewReader("x")}}, "section .linux: given twice"},
		{"empty", nil, []Section{{".linux", 0, strings.NewReader("")}}, "section .linux is empty"},
		{"short data", nil, []Section{{".linux", 10, strings.NewReader("abc")}}, "section .linux: its data ended after 3 of its 10 bytes"},
		{"long data", nil, []Section{{".linux", 2, strings.NewReader("abc")}}, "section .linux: its data is longer than its size, 2 bytes"},
		{"read error", nil, []Section{{".linux", 10, iotest.ErrReader(io.ErrClosedPipe)}}, "section .linux: io: read/write on closed pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub := minimalStub(t, false)
			if tc.stub != nil {
				stub = tc.stub(stub)
			}
			secs := tc.sections
			if secs == nil {
				for _, s := range ukiSections(10, 10) {
					secs = append(secs, Section{Name: s.name, Size: int64(len(s.data)), Data: bytes.NewReader(s.data)})
				}
			}
			f, err := os.Create(filepath.Join(t.TempDir(), "uki.efi"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			err = Build(f, stub, secs, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build() = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// BuildFiles makes the UKI of Build from files, atomically: the final name appears only once it is
// whole, and a failure leaves nothing behind.
func TestBuildFiles(t *testing.T) {
	dir := t.TempDir()
	stub := minimalStub(t, true)
	in := Inputs{Stub: filepath.Join(dir, "stub"), Kernel: filepath.Join(dir, "vmlinuz"), Initramfs: filepath.Join(dir, "initramfs"),
		Cmdline: "console=ttyS0", Version: "v0.0.0-test"}
	kernel, initrd := randomBytes(5, 100_001), randomBytes(6, 20_000)
	for p, b := range map[string][]byte{in.Stub: stub, in.Kernel: kernel, in.Initramfs: initrd} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "cairn.efi")
	ts := uint32(1700000000)
	if err := BuildFiles(out, in, Options{Timestamp: &ts}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	secs := []fakeSection{{".osrel", []byte(OSRelease("v0.0.0-test"))}, {".cmdline", []byte("console=ttyS0\x00")}, {".linux", kernel}, {".initrd", initrd}}
	want, err := build(t, stub, secs, Options{Timestamp: &ts}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("BuildFiles wrote another UKI than Build of the same inputs")
	}
	checkUKI(t, stub, got, secs, Options{Timestamp: &ts})
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("BuildFiles left %s.tmp: %v", out, err)
	}

	bad := filepath.Join(dir, "bad.efi")
	in.Kernel = filepath.Join(dir, "missing")
	if err := BuildFiles(bad, in, Options{}); err == nil || !strings.Contains(err.Error(), "section .linux") {
		t.Errorf("BuildFiles(missing kernel) = %v, want an error naming .linux", err)
	}
	in.Kernel, in.Stub = filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "vmlinuz") // not a PE image
	if err := BuildFiles(bad, in, Options{}); err == nil || !strings.Contains(err.Error(), "EFI stub: not a PE image") {
		t.Errorf("BuildFiles(kernel as stub) = %v, want an error about the stub", err)
	}
	for _, p := range []string{bad, bad + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("a failed BuildFiles left %s: %v", p, err)
		}
	}
}

func TestOSReleaseHasNoSortKey(t *testing.T) {
	osrel := OSRelease("v0.0.0-test")
	for _, line := range strings.Split(osrel, "\n") {
		if strings.HasPrefix(line, "ID=") || strings.HasPrefix(line, "IMAGE_ID=") {
			t.Errorf("os-release has %q: systemd-boot would sort the entries by VERSION instead of by name", line)
		}
	}
	for _, want := range []string{"NAME=Cairn\n", "VERSION=v0.0.0-test\n"} {
		if !strings.Contains(osrel, want) {
			t.Errorf("os-release %q lacks %q (systemd-boot needs a name and a version to list a UKI)", osrel, want)
		}
	}
}
