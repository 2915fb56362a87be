package logs

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/supervisor"
)

// files returns the contents of every file in dir by name.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func TestFileRotatesBySize(t *testing.T) {
	tests := []struct {
		name   string
		keep   int
		writes []string
		want   map[string]string
	}{
		{
			name:   "fits",
			keep:   2,
			writes: []string{"aaaa\n", "bbbb\n"},
			want:   map[string]string{"s.log": "aaaa\nbbbb\n"},
		},
		{
			name:   "one rotation",
			keep:   2,
			writes: []string{"aaaa\n", "bbbb\n", "cccc\n"},
			want:   map[string]string{"s.log": "cccc\n", "s.log.1": "aaaa\nbbbb\n"},
		},
		{
			name:   "oldest dropped",
			keep:   2,
			writes: []string{"aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n", "ffff\n", "gggg\n"},
			want:   map[string]string{"s.log": "gggg\n", "s.log.1": "eeee\nffff\n", "s.log.2": "cccc\ndddd\n"},
		},
		{
			name:   "no older files kept",
			keep:   0,
			writes: []string{"aaaa\n", "bbbb\n", "cccc\n"},
			want:   map[string]string{"s.log": "cccc\n"},
		},
		{
			name:   "a write larger than the limit gets a file of its own",
			keep:   3,
			writes: []string{"aa\n", "0123456789abcdef\n", "bb\n"},
			want:   map[string]string{"s.log": "bb\n", "s.log.1": "0123456789abcdef\n", "s.log.2": "aa\n"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w := &File{Path: filepath.Join(dir, "s.log"), MaxSize: 10, Keep: tc.keep}
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, files(t, dir)); diff != "" {
				t.Errorf("files after writes mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFileContinuesAnExistingLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.log")
	if err := os.WriteFile(path, []byte("from the last boot\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	w := &File{Path: path, MaxSize: 25, Keep: 1}
	w.Write([]byte("now\n"))
	w.Write([]byte("rotates\n"))
	w.Close()
	want := map[string]string{"s.log": "rotates\n", "s.log.1": "from the last boot\nnow\n"}
	if diff := cmp.Diff(want, files(t, dir)); diff != "" {
		t.Errorf("files mismatch (-want +got):\n%s", diff)
	}
}

func TestFileReportsAMissingDirectory(t *testing.T) {
	w := &File{Path: filepath.Join(t.TempDir(), "gone", "s.log")}
	if _, err := w.Write([]byte("x\n")); err == nil || !strings.Contains(err.Error(), "s.log") {
		t.Fatalf("Write() into a missing directory = %v, want an error naming the file", err)
	}
}

func TestFilesAttachAndDetach(t *testing.T) {
	sup := supervisor.New(nil, nil)
	sup.Logs("machined").Add("booted from RAM")
	dir := filepath.Join(t.TempDir(), "var", "log", "cairn")
	fs := &Files{Dir: dir}
	if err := fs.Attach(sup, "machined", "kubelet"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Attach(sup, "machined"); err != nil { // again: no duplicate lines
		t.Fatal(err)
	}
	sup.Logs("machined").Add("EPHEMERAL mounted")
	sup.Logs("kubelet").Add("kubelet started")
	if err := fs.Detach(); err != nil {
		t.Fatal(err)
	}
	sup.Logs("machined").Add("after detach")

	got := files(t, dir)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"kubelet.log", "machined.log"}, names); diff != "" {
		t.Fatalf("log files mismatch (-want +got):\n%s", diff)
	}
	var texts []string
	for _, l := range strings.Split(strings.TrimSpace(got["machined.log"]), "\n") {
		_, text, _ := strings.Cut(l, " ") // drop the time
		texts = append(texts, text)
	}
	if diff := cmp.Diff([]string{"booted from RAM", "EPHEMERAL mounted"}, texts); diff != "" {
		t.Errorf("machined.log lines mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(got["kubelet.log"], " kubelet started\n") {
		t.Errorf("kubelet.log = %q, want the kubelet's line", got["kubelet.log"])
	}
}
