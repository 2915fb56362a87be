package stamp

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHashTracksInputsOnly(t *testing.T) {
	src := t.TempDir()
	write(t, filepath.Join(src, "versions.env"), "A=1\n")
	write(t, filepath.Join(src, "kube", "main.go"), "package main\n")
	write(t, filepath.Join(src, "kube", "go.sum"), "x\n")
	base, err := Hash(src, "go1.26.8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		edit    func(dir string)
		extra   string
		changes bool
	}{
		{"nothing", func(string) {}, "go1.26.8", false},
		{"test file", func(d string) { write(t, filepath.Join(d, "kube", "main_test.go"), "package main\n") }, "go1.26.8", false},
		{"golden file", func(d string) { write(t, filepath.Join(d, "x", "testdata", "a.go"), "package x\n") }, "go1.26.8", false},
		{"readme", func(d string) { write(t, filepath.Join(d, "README.md"), "hi\n") }, "go1.26.8", false},
		{"versions", func(d string) { write(t, filepath.Join(d, "versions.env"), "A=2\n") }, "go1.26.8", true},
		{"source", func(d string) { write(t, filepath.Join(d, "kube", "main.go"), "package main // x\n") }, "go1.26.8", true},
		{"go.sum", func(d string) { write(t, filepath.Join(d, "kube", "go.sum"), "y\n") }, "go1.26.8", true},
		{"new source", func(d string) { write(t, filepath.Join(d, "newcmd", "main.go"), "package main\n") }, "go1.26.8", true},
		{"toolchain", func(string) {}, "go1.26.9", true},
		// The conformance suite's module is no input of the node's bundle, but a directory of that name
		// deeper down (its own cmd/conformance) is one of the suite's inputs.
		{"conformance module", func(d string) { write(t, filepath.Join(d, "conformance", "suite", "a.go"), "package s\n") }, "go1.26.8", false},
		{"a cmd/conformance", func(d string) { write(t, filepath.Join(d, "cmd", "conformance", "main.go"), "package main\n") }, "go1.26.8", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			tt.edit(dir)
			got, err := Hash(dir, tt.extra)
			if err != nil {
				t.Fatal(err)
			}
			if (got != base) != tt.changes {
				t.Errorf("Hash() after %s changed = %v, want %v", tt.name, got != base, tt.changes)
			}
		})
	}
}

func TestUpToDate(t *testing.T) {
	out := t.TempDir()
	write(t, filepath.Join(out, "bin", "kube"), "kube")
	write(t, filepath.Join(out, "images.tar"), "tar")
	if ok, why := UpToDate(out, "sha256:a"); ok || why != "no previous build" {
		t.Errorf("UpToDate(no stamp) = %v, %q, want false, no previous build", ok, why)
	}
	if err := Write(out, "sha256:a", []string{"bin/kube", "images.tar"}); err != nil {
		t.Fatal(err)
	}
	if ok, why := UpToDate(out, "sha256:a"); !ok {
		t.Errorf("UpToDate(same inputs) = false (%s), want true", why)
	}
	if ok, why := UpToDate(out, "sha256:b"); ok || why != "inputs changed" {
		t.Errorf("UpToDate(other inputs) = %v, %q, want false, inputs changed", ok, why)
	}
	write(t, filepath.Join(out, "images.tar"), "truncated?")
	if ok, why := UpToDate(out, "sha256:a"); ok || why != "images.tar missing or changed" {
		t.Errorf("UpToDate(changed output) = %v, %q, want false", ok, why)
	}
	if err := os.Remove(filepath.Join(out, "bin", "kube")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := UpToDate(out, "sha256:a"); ok {
		t.Error("UpToDate(missing output) = true, want false")
	}
	if err := Write(out, "sha256:a", []string{"bin/missing"}); err == nil {
		t.Error("Write(missing output) error = nil, want error")
	}
}
