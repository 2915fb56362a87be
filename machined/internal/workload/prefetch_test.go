package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/payload"
)

func TestPrefetch(t *testing.T) {
	dir := t.TempDir()
	put := func(layer, name, data string) {
		p := filepath.Join(dir, payload.LayersDir, layer, "usr", "local", "bin", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	put("aaa", "kube", "kube binary")
	put("bbb", "etcd", "etcd")
	put("ccc", "flanneld", "not asked for")

	for _, tc := range []struct {
		names      []string
		bytes      int64
		files      int
		errContain string
	}{
		{prefetchControlPlane, int64(len("kube binary") + len("etcd")), 2, ""},
		{prefetchWorker, int64(len("kube binary")), 1, ""},
		{[]string{"kube", "missing"}, int64(len("kube binary")), 1, "usr/local/bin/missing"},
	} {
		n, files, err := prefetch(dir, tc.names)
		if n != tc.bytes || files != tc.files {
			t.Errorf("prefetch(%q) read %d bytes in %d files, want %d in %d", tc.names, n, files, tc.bytes, tc.files)
		}
		if (tc.errContain == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.errContain)) {
			t.Errorf("prefetch(%q) = error %v, want one naming %q", tc.names, err, tc.errContain)
		}
	}
}
