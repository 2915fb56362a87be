// Package disk is the home of Cairn's disk handling; the work is in its subpackages, each with one job:
//
//   - probe: recognise what is on a device (filesystems, partition tables, LUKS, LVM, MD RAID, swap) by
//     reading the on-disk formats in Go;
//   - gpt: write a GUID partition table;
//   - inventory: list the disks from sysfs with what probe finds on them, and Match a config selector to
//     exactly one disk;
//   - plan: decide, without touching anything, what happens to each volume (format, keep,
//     wipe-and-format, refuse, tmpfs); it also defines the Cairn label;
//   - apply: carry out one step: re-read the disk, partition, mkfs, fsck, mount.
//
// Typical use, in the Init/Join sequences and the Plan RPC:
//
//	scanner := inventory.Scanner{SysRoot: "/sys", DevRoot: "/dev", Boot: []string{bootDevice}}
//	disks, err := scanner.Scan(ctx)
//	p := plan.Make(plan.Input{Disks: disks, Config: cfg.Machine.Disks,
//		MachineType: cfg.Machine.Type, ClusterID: cfg.Cluster.ID})
//	if err := p.Err(); err != nil { // the Plan RPC shows p; Init refuses to start
//		return err
//	}
//	a := &apply.Applier{Disks: scanner, Runner: apply.ExecRunner{}, Mounter: mounter}
//	for _, step := range p.Steps { // STATE, EPHEMERAL, ETCD: mount order
//		if _, err := a.Apply(ctx, step); err != nil {
//			return err
//		}
//	}
package disk
