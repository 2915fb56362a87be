package volumes

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/disk/apply"
)

func TestUnmountOrder(t *testing.T) {
	table := []apply.MountEntry{
		{Dev: "0:22", Target: "/"},
		{Dev: "254:1", Target: "/system/state"},
		{Dev: "254:17", Target: "/var"},
		{Dev: "254:33", Target: "/var/lib/etcd"},
		{Dev: "254:1", Target: "/etc/kubernetes"}, // a bind of STATE's kubernetes directory
		{Dev: "254:17", Target: "/var/lib/kubelet"},
		{Dev: "0:50", Target: "/var/lib/kubelet/pods/x/volumes/token"},
		{Dev: "0:51", Target: "/var/lib/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs"},
		{Dev: "0:52", Target: "/variable"}, // a sibling name, not below /var
	}
	tests := []struct {
		target string
		want   []string
	}{
		{"/system/state", []string{"/etc/kubernetes", "/system/state"}},
		{"/var", []string{
			"/var/lib/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs",
			"/var/lib/kubelet/pods/x/volumes/token",
			"/var/lib/kubelet",
			"/var/lib/etcd",
			"/var",
		}},
		{"/var/lib/etcd", []string{"/var/lib/etcd"}},
		{"/not/mounted", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, UnmountOrder(table, tt.target)); diff != "" {
			t.Errorf("UnmountOrder(%s) (-want +got):\n%s", tt.target, diff)
		}
	}
}
