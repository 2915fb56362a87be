package volumes

import (
	"context"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
)

// Mount is one mounted filesystem, for the Mounts RPC.
type Mount struct {
	Source, Target, FSType, Options string
	Volume                          string // state, ephemeral, etcd (also a bind mount of one of its directories), or "" for a system mount
	UUID, Label                     string
	Size, Used                      uint64

	dev string // MAJOR:MINOR, to name the volume of a bind mount
}

// Usage reports a filesystem's size and use (sys.Statfs).
type Usage func(path string) (size, used uint64, err error)

// Disks lists the block devices with what is on them.
func (m *Manager) Disks(ctx context.Context) ([]inventory.Disk, error) { return m.scan(ctx) }

// Mounts lists what is mounted under the node's root, each Cairn volume named, with filesystem UUIDs and
// labels from the disks. In sandbox mode without block devices the volumes are directories and are listed
// as such.
func (m *Manager) Mounts(ctx context.Context, usage Usage) ([]Mount, error) {
	info := m.MountInfo
	if info == "" {
		info = apply.DefaultMountInfo
	}
	entries, err := apply.ReadMountInfo(info)
	if err != nil {
		return nil, err
	}
	root := m.Paths.Join()
	targets := map[string]string{}
	for _, v := range []plan.Volume{plan.State, plan.Ephemeral, plan.Etcd} {
		targets[filepath.Join(root, v.DefaultTarget())] = strings.ToLower(string(v))
	}
	ids := map[string]partitionID{}
	if m.Devices {
		if disks, err := m.Scanner.Scan(ctx); err == nil {
			ids = partitionIDs(disks)
		}
	}
	var out []Mount
	seen := map[string]bool{}
	for _, e := range entries {
		if root != "/" && e.Target != root && !strings.HasPrefix(e.Target, root+"/") {
			continue
		}
		mt := Mount{Source: e.Source, Target: e.Target, FSType: e.FSType, Options: e.Options, Volume: targets[e.Target], dev: e.Dev}
		if id, ok := ids[e.Dev]; ok {
			mt.UUID, mt.Label = id.uuid, id.label
		}
		if usage != nil {
			mt.Size, mt.Used, _ = usage(e.Target)
		}
		seen[e.Target] = true
		out = append(out, mt)
	}
	if !m.Devices {
		for target, vol := range targets {
			if !seen[target] {
				mt := Mount{Source: target, Target: target, FSType: string(Directory), Volume: vol}
				if usage != nil {
					mt.Size, mt.Used, _ = usage(root)
				}
				out = append(out, mt)
			}
		}
	}
	// A volume is what is visible at its target: the last mount there (the early tmpfs under /var is not).
	// A hidden mount's size cannot be read through its path: the statfs there answered for the visible one.
	last := map[string]int{}
	for i, m := range out {
		last[m.Target] = i
	}
	for i := range out {
		if last[out[i].Target] != i {
			out[i].Volume, out[i].Size, out[i].Used = "", 0, 0
		}
	}
	// A bind mount of a volume's directory (STATE's kubernetes directory on /etc/kubernetes, EPHEMERAL's
	// /var/opt on /opt) is that volume's filesystem: what is written there lives and dies with the volume.
	byDev := map[string]string{}
	for _, m := range out {
		if m.Volume != "" && m.dev != "" {
			byDev[m.dev] = m.Volume
		}
	}
	for i := range out {
		if out[i].Volume == "" && last[out[i].Target] == i {
			out[i].Volume = byDev[out[i].dev]
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out, nil
}

type partitionID struct{ uuid, label string }

// partitionIDs maps MAJOR:MINOR of every partition (and whole disk) to its filesystem's UUID and label.
func partitionIDs(disks []inventory.Disk) map[string]partitionID {
	out := map[string]partitionID{}
	for _, d := range disks {
		if len(d.Signatures) > 0 && d.Dev != "" {
			out[d.Dev] = partitionID{d.Signatures[0].UUID, d.Signatures[0].Label}
		}
		for _, p := range d.Partitions {
			if len(p.Signatures) > 0 && p.Dev != "" {
				out[p.Dev] = partitionID{p.Signatures[0].UUID, p.Signatures[0].Label}
			}
		}
	}
	return out
}
