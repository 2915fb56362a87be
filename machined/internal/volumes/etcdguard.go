package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
)

// CheckEtcdVolume is protokube's guard: etcd's manifest is written only when its data path is the etcd
// volume Cairn made for this cluster, so the kubelet can never start etcd on the root filesystem or on
// EPHEMERAL by mistake (a mount that failed silently, a disk swapped for another cluster's). It runs at
// every start, not only at Init. What is mounted there is read from the mount table, and whose it is from
// the disk the mount comes from: the partition name carrying this cluster's ID and the filesystem's Cairn
// label, as the disk plan reads them.
func (m *Manager) CheckEtcdVolume(ctx context.Context, c *config.MachineConfig) error {
	target := filepath.Join(m.Paths.Join(), plan.Etcd.DefaultTarget())
	if !m.Devices {
		// Sandbox mode keeps every volume in a directory (see Directory); there is no disk to check.
		if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
			return fmt.Errorf("the etcd volume's directory %s is not there: %v", target, err)
		}
		return nil
	}
	info := m.MountInfo
	if info == "" {
		info = apply.DefaultMountInfo
	}
	entries, err := apply.ReadMountInfo(info)
	if err != nil {
		return err
	}
	var disks []inventory.Disk
	tmpfs := c.Machine.Disks.Etcd != nil && c.Machine.Disks.Etcd.Tmpfs
	if !tmpfs {
		if disks, err = m.scan(ctx); err != nil {
			return fmt.Errorf("etcd volume check: %w", err)
		}
	}
	return checkEtcdMount(entries, disks, target, c.Cluster.ID, tmpfs)
}

// checkEtcdMount decides the guard from the mount table and the disks.
func checkEtcdMount(entries []apply.MountEntry, disks []inventory.Disk, target, clusterID string, tmpfs bool) error {
	var at *apply.MountEntry
	var under apply.MountEntry // the mount the target lives on when nothing is mounted there
	for i, e := range entries {
		switch {
		case e.Target == target:
			at = &entries[i] // the last one is what is visible
		case (e.Target == "/" || strings.HasPrefix(target, strings.TrimSuffix(e.Target, "/")+"/")) && len(e.Target) >= len(under.Target):
			under = e
		}
	}
	if at == nil {
		return fmt.Errorf("refusing to start etcd: nothing is mounted at %s, so its data would go to %s (%s on %s), not the etcd volume",
			target, under.Target, under.FSType, under.Source)
	}
	if tmpfs {
		if at.FSType != "tmpfs" {
			return fmt.Errorf("refusing to start etcd: machine.disks.etcd is tmpfs, but %s is %s from %s", target, at.FSType, at.Source)
		}
		return nil
	}
	for _, d := range disks {
		for _, p := range d.Partitions {
			if p.Dev != at.Dev {
				continue
			}
			l, ok := plan.ParseLabel(p)
			switch {
			case !ok || l.Volume != plan.Etcd:
				return fmt.Errorf("refusing to start etcd: %s is %s (%s, partition %q), which is not a Cairn etcd volume", target, at.Source, at.FSType, p.Label)
			case !l.IsCluster(clusterID):
				return fmt.Errorf("refusing to start etcd: %s is %s, the etcd volume of another cluster (partition %q; this cluster is %s)", target, at.Source, p.Label, clusterID)
			case len(p.Signatures) == 0 || p.Signatures[0].Label != plan.Etcd.FSLabel():
				return fmt.Errorf("refusing to start etcd: %s is %s, whose filesystem is not labelled %s", target, at.Source, plan.Etcd.FSLabel())
			}
			return nil
		}
	}
	return fmt.Errorf("refusing to start etcd: %s is %s (%s, device %s), which is no partition of the machine's disks", target, at.Source, at.FSType, at.Dev)
}
