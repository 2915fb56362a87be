package volumes

import (
	"strings"
	"testing"

	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

func TestCheckEtcdMount(t *testing.T) {
	const target, cluster = "/var/lib/etcd", "e3217e6d4157725f"
	base := []apply.MountEntry{
		{Dev: "0:20", Target: "/", FSType: "squashfs", Source: "/dev/loop0"},
		{Dev: "254:17", Target: "/var", FSType: "xfs", Source: "/dev/vdb1"},
	}
	etcdPart := func(name, fsLabel string) inventory.Disk {
		return inventory.Disk{Path: "/dev/vdc", Partitions: []inventory.Partition{{Dev: "254:33", Path: "/dev/vdc1",
			Type: plan.Etcd.PartitionType(), Label: name, Signatures: []probe.Signature{{Type: "xfs", Label: fsLabel}}}}}
	}
	mounted := append(append([]apply.MountEntry(nil), base...), apply.MountEntry{Dev: "254:33", Target: target, FSType: "xfs", Source: "/dev/vdc1"})
	other := inventory.Disk{Path: "/dev/vdd", Partitions: []inventory.Partition{{Dev: "254:33", Path: "/dev/vdd1", Label: "data",
		Signatures: []probe.Signature{{Type: "ext4", Label: "data"}}}}}
	tests := []struct {
		name    string
		entries []apply.MountEntry
		disks   []inventory.Disk
		tmpfs   bool
		want    string // "" = allowed
	}{
		{"the cluster's etcd volume", mounted, []inventory.Disk{etcdPart(plan.PartitionName(plan.Etcd, cluster), "CAIRN_ETCD")}, false, ""},
		{"a directory on EPHEMERAL", base, nil, false, "nothing is mounted at /var/lib/etcd, so its data would go to /var (xfs on /dev/vdb1)"},
		{"a directory on the root", base[:1], nil, false, "its data would go to / (squashfs on /dev/loop0)"},
		{"another filesystem mounted there", mounted, []inventory.Disk{other}, false, `/dev/vdc1 (xfs, partition "data"), which is not a Cairn etcd volume`},
		{"another cluster's etcd volume", mounted, []inventory.Disk{etcdPart(plan.PartitionName(plan.Etcd, "0123456789abcdef"), "CAIRN_ETCD")}, false,
			"the etcd volume of another cluster"},
		{"an unlabelled filesystem", mounted, []inventory.Disk{etcdPart(plan.PartitionName(plan.Etcd, cluster), "")}, false, "not labelled CAIRN_ETCD"},
		{"a mount from no disk", mounted, nil, false, "which is no partition of the machine's disks"},
		{"tmpfs asked and there", append(append([]apply.MountEntry(nil), base...), apply.MountEntry{Dev: "0:40", Target: target, FSType: "tmpfs", Source: "tmpfs"}),
			nil, true, ""},
		{"tmpfs asked, a disk there", mounted, nil, true, "machine.disks.etcd is tmpfs, but /var/lib/etcd is xfs from /dev/vdc1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEtcdMount(tc.entries, tc.disks, target, cluster, tc.tmpfs)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("checkEtcdMount() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("checkEtcdMount() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
