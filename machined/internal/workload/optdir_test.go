package workload

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/paths"
)

func TestMakeOptDir(t *testing.T) {
	for _, tc := range []struct {
		name      string
		node      bool  // a node binds /var/opt onto /opt; sandbox mode has no bind
		bindErr   error // what the bind answers
		wantBinds []string
		wantErr   string
	}{
		{"node", true, nil, []string{"var/opt -> opt"}, ""},
		{"sandbox", false, nil, nil, ""},
		{"a failed bind names /opt", true, errors.New("permission denied"), []string{"var/opt -> opt"}, "opt writable: permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			l := kube.NewLayout(paths.Paths{Root: root})
			var binds []string
			var bind func(src, dst string) error
			if tc.node {
				bind = func(src, dst string) error {
					if _, err := os.Stat(src); err != nil {
						t.Errorf("bind source: %v", err)
					}
					s, _ := filepath.Rel(root, src)
					d, _ := filepath.Rel(root, dst)
					binds = append(binds, s+" -> "+d)
					return tc.bindErr
				}
			}
			err := makeOptDir(l, bind)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("makeOptDir() = %v, want error %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantBinds, binds); diff != "" {
				t.Errorf("binds (-want +got):\n%s", diff)
			}
			if tc.wantErr != "" {
				return
			}
			if fi, err := os.Stat(filepath.Join(root, "opt", "cni", "bin")); err != nil || !fi.IsDir() {
				t.Errorf("/opt/cni/bin after makeOptDir: %v", err)
			}
		})
	}
}
