package tree

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func paths(t *Tree) []string {
	var out []string
	for _, e := range t.Entries() {
		out = append(out, e.Path)
	}
	return out
}

func TestAddCreatesParentsAndSorts(t *testing.T) {
	tr := New()
	if err := tr.Bytes("/usr/lib/os-release", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr.Link("/lib", "usr/lib"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Dirs(0o755, "/usr", "/a-b"); err != nil {
		t.Fatal(err)
	}
	want := []string{"/", "/a-b", "/lib", "/usr", "/usr/lib", "/usr/lib/os-release"}
	if diff := cmp.Diff(want, paths(tr)); diff != "" {
		t.Errorf("Entries() paths (-want +got):\n%s", diff)
	}
}

func TestAddConflicts(t *testing.T) {
	tr := New()
	if err := tr.Bytes("/etc/x", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr.Bytes("/etc/x", []byte("again"), 0o644); err == nil {
		t.Errorf("Add(/etc/x twice) = nil, want an error")
	}
	if err := tr.Bytes("/etc/x/y", nil, 0o644); err == nil {
		t.Errorf("Add(/etc/x/y under a file) = nil, want an error")
	}
}

func TestStage(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("content"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := New()
	for _, err := range []error{
		tr.Copy("/usr/sbin/tool", src, 0o755),
		tr.Link("/sbin", "usr/sbin"),
		tr.Dirs(0o700, "/var"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "stage")
	if err := Stage(tr, out); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(out, "sbin", "tool")) // through the symlink
	if err != nil {
		t.Fatalf("staged tool: %v", err)
	}
	if fi.Mode().Perm() != 0o755 || fi.Size() != 7 {
		t.Errorf("staged tool = %v %d bytes, want -rwxr-xr-x 7 bytes", fi.Mode(), fi.Size())
	}
	if fi, err := os.Stat(filepath.Join(out, "var")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("staged /var = %v, %v; want drwx------", fi, err)
	}
}
