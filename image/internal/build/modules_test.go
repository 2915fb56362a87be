package build

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeKernelRoot lays out a kernel under a temp root: boot/vmlinuz-1.0 and lib/modules/1.0 with the
// given modules.dep, and every other module the image asks for in modules.builtin.
func fakeKernelRoot(t *testing.T, dep map[string][]string, softdep string) string {
	t.Helper()
	root := t.TempDir()
	mods := filepath.Join(root, "lib", "modules", "1.0")
	if err := os.MkdirAll(mods, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "boot"), 0o755); err != nil {
		t.Fatal(err)
	}
	var depText, builtin strings.Builder
	shipped := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(dep)) {
		depText.WriteString(p + ": " + strings.Join(dep[p], " ") + "\n")
		shipped[strings.TrimSuffix(filepath.Base(p), ".ko")] = true
	}
	for _, n := range slices.Concat(InitModules, RootfsModules, RequestModules) {
		if !shipped[n] {
			builtin.WriteString("kernel/" + n + ".ko\n")
		}
	}
	for name, text := range map[string]string{
		"boot/vmlinuz-1.0":                "",
		"lib/modules/1.0/modules.dep":     depText.String(),
		"lib/modules/1.0/modules.builtin": builtin.String(),
		"lib/modules/1.0/modules.softdep": softdep,
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// ModuleNames is what make kernel builds in: an option missing from the list would leave the custom
// kernel without a driver the image relies on (a dependency, a softdep), and a built-in listed would be
// harmless but wrong.
func TestModuleNames(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dep     map[string][]string
		softdep string
		want    []string
	}{
		{
			name: "everything built in",
		},
		{
			name: "dependencies come along",
			dep: map[string][]string{
				"kernel/fs/xfs/xfs.ko":                           {"kernel/lib/libcrc32c.ko"},
				"kernel/lib/libcrc32c.ko":                        nil,
				"kernel/drivers/block/loop.ko":                   nil,
				"kernel/drivers/unused/foo.ko":                   nil,
				"kernel/drivers/virtio/virtio_pci.ko":            {"kernel/drivers/virtio/virtio_pci_modern_dev.ko"},
				"kernel/drivers/virtio/virtio_pci_modern_dev.ko": nil,
			},
			want: []string{"libcrc32c", "loop", "virtio_pci", "virtio_pci_modern_dev", "xfs"},
		},
		{
			name: "modules for the kernel's requests, with their dependencies",
			dep: map[string][]string{
				"kernel/net/ipv4/ipip.ko":      {"kernel/net/ipv4/tunnel4.ko", "kernel/net/ipv4/ip_tunnel.ko"},
				"kernel/net/ipv4/tunnel4.ko":   nil,
				"kernel/net/ipv4/ip_tunnel.ko": nil,
			},
			want: []string{"ip_tunnel", "ipip", "tunnel4"},
		},
		{
			name: "softdeps come along",
			dep: map[string][]string{
				"kernel/fs/ext4/ext4.ko":        nil,
				"kernel/crypto/crc32c_extra.ko": nil,
			},
			softdep: "softdep ext4 pre: crc32c_extra\n",
			want:    []string{"crc32c_extra", "ext4"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ModuleNames(fakeKernelRoot(t, tc.dep, tc.softdep))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ModuleNames() (-want +got):\n%s", diff)
			}
		})
	}
}

// A kernel with neither the module nor a built-in of that name cannot make the image: say which.
func TestModuleNamesMissing(t *testing.T) {
	root := fakeKernelRoot(t, nil, "")
	builtin := filepath.Join(root, "lib", "modules", "1.0", "modules.builtin")
	b, err := os.ReadFile(builtin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(builtin, []byte(strings.ReplaceAll(string(b), "kernel/overlay.ko\n", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ModuleNames(root)
	if err == nil || !strings.Contains(err.Error(), "overlay") {
		t.Errorf("ModuleNames() without overlay = %v, want an error naming overlay", err)
	}
}
