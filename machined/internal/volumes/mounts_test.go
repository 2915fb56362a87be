package volumes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/machined/internal/paths"
)

// A node's mount table after Init, trimmed: the early tmpfs under /var, the volumes on top, binds of their
// directories, and mounts that belong to no volume.
const nodeMountInfo = `22 1 0:20 / / ro,relatime - squashfs /dev/loop0 ro
30 22 0:25 / /var rw,nosuid - tmpfs tmpfs rw
31 22 254:3 / /system/state rw,nosuid,nodev,noexec,relatime - ext4 /dev/vda3 rw
32 22 254:4 / /var rw,nosuid,nodev,relatime - xfs /dev/vda4 rw
33 32 254:5 / /var/lib/etcd rw,nosuid,nodev,noexec,relatime - ext4 /dev/vda5 rw
34 22 254:3 /kubernetes /etc/kubernetes rw,nosuid,nodev,noexec,relatime - ext4 /dev/vda3 rw
35 22 254:4 /opt /opt rw,nosuid,nodev,relatime - xfs /dev/vda4 rw
36 32 0:40 / /var/lib/kubelet/pods/p/volumes/kubernetes.io~projected/token rw,relatime - tmpfs tmpfs rw
37 22 0:41 / /run rw,nosuid,nodev - tmpfs tmpfs rw
`

func TestMounts(t *testing.T) {
	info := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(info, []byte(nodeMountInfo), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manager{Paths: paths.Paths{Root: "/"}, MountInfo: info}
	statfs := func(string) (uint64, uint64, error) { return 1 << 30, 1 << 20, nil }
	got, err := m.Mounts(context.Background(), statfs)
	if err != nil {
		t.Fatal(err)
	}
	volumeAt := map[string][]string{}
	for _, mt := range got {
		volumeAt[mt.Target] = append(volumeAt[mt.Target], mt.Volume)
		if mt.Target == "/var" && mt.FSType == "tmpfs" && (mt.Size != 0 || mt.Used != 0) {
			t.Errorf("the hidden tmpfs at /var has size %d, used %d: want 0 (unknown), not EPHEMERAL's", mt.Size, mt.Used)
		}
	}
	want := map[string][]string{
		"/":               {""},
		"/var":            {"", "ephemeral"}, // the early tmpfs is hidden by EPHEMERAL
		"/system/state":   {"state"},
		"/var/lib/etcd":   {"etcd"},
		"/etc/kubernetes": {"state"},     // a bind of STATE's directory
		"/opt":            {"ephemeral"}, // a bind of EPHEMERAL's directory
		"/run":            {""},
		"/var/lib/kubelet/pods/p/volumes/kubernetes.io~projected/token": {""}, // a tmpfs of its own below /var
	}
	if diff := cmp.Diff(want, volumeAt); diff != "" {
		t.Errorf("Mounts() volumes by target (-want +got):\n%s", diff)
	}
}
