package uki

import (
	"bytes"
	"crypto/sha256"
	"debug/pe"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Until now objcopy made the UKIs that booted in QEMU: from the same stub, sections and addresses,
// Build must give the same file.
func TestBuildMatchesObjcopy(t *testing.T) {
	stub := readRealStub(t)
	if _, err := exec.LookPath("objcopy"); err != nil {
		t.Skipf("no objcopy (binutils): %v", err)
	}
	for _, tc := range []struct {
		name     string
		sections []fakeSection
	}{
		{"small", ukiSections(12, 15)},
		{"odd and larger than 64 KiB", ukiSections(150_001, 70_003)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			stubFile, objOut := filepath.Join(dir, "stub.efi"), filepath.Join(dir, "objcopy.efi")
			if err := os.WriteFile(stubFile, stub, 0o644); err != nil {
				t.Fatal(err)
			}
			// The image builder's objcopy command, as it was.
			sizes := make([]int64, len(tc.sections))
			for i, s := range tc.sections {
				sizes[i] = int64(len(s.data))
			}
			var args []string
			for i, vma := range layout(stubEndOf(openPE(t, stub)), sizes) {
				s := tc.sections[i]
				p := filepath.Join(dir, fmt.Sprint(i))
				if err := os.WriteFile(p, s.data, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--add-section", s.name+"="+p, "--change-section-vma", fmt.Sprintf("%s=%#x", s.name, vma),
					"--set-section-flags", s.name+"=data,readonly")
			}
			if out, err := exec.Command("objcopy", append(args, stubFile, objOut)...).CombinedOutput(); err != nil {
				t.Fatalf("objcopy: %v: %s", err, out)
			}
			want, err := os.ReadFile(objOut)
			if err != nil {
				t.Fatal(err)
			}
			wf := openPE(t, want)
			// objcopy stamps the time it ran; give Build the same.
			ts := wf.FileHeader.TimeDateStamp
			got, err := build(t, stub, tc.sections, Options{Timestamp: &ts}, nil)
			if err != nil {
				t.Fatal(err)
			}
			gf := openPE(t, got)
			if diff := cmp.Diff(sectionSummary(t, wf), sectionSummary(t, gf)); diff != "" {
				t.Errorf("sections (-objcopy +Build):\n%s", diff)
			}
			if diff := cmp.Diff(wf.OptionalHeader, gf.OptionalHeader); diff != "" {
				t.Errorf("optional header (-objcopy +Build):\n%s", diff)
			}
			if diff := cmp.Diff(wf.FileHeader, gf.FileHeader); diff != "" {
				t.Errorf("file header (-objcopy +Build):\n%s", diff)
			}
			if !bytes.Equal(want, got) {
				i := 0
				for i < min(len(want), len(got)) && want[i] == got[i] {
					i++
				}
				t.Errorf("Build's UKI (%d bytes) differs from objcopy's (%d bytes) from offset %#x", len(got), len(want), i)
			}
		})
	}
}

func stubEndOf(f *pe.File) uint64 {
	var e uint64
	for _, s := range f.Sections {
		e = max(e, uint64(s.VirtualAddress)+uint64(s.VirtualSize))
	}
	return e
}

// secSummary is what the stub and the loader see of a section; its content as a SHA-256, so that a
// difference reads in a line.
type secSummary struct {
	Name                                    string
	VMA, VirtualSize, Size, Characteristics uint32
	SHA256                                  string
}

func sectionSummary(t *testing.T, f *pe.File) []secSummary {
	t.Helper()
	var s []secSummary
	for _, sec := range f.Sections {
		sum := sha256.Sum256(sectionData(t, sec))
		s = append(s, secSummary{sec.Name, sec.VirtualAddress, sec.VirtualSize, sec.Size, sec.Characteristics, hex.EncodeToString(sum[:])})
	}
	return s
}
