package plan

import (
	"encoding/json"
	"strings"

	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

// The Cairn label.
//
// A disk Cairn formats for a volume gets a GPT with exactly one partition, from the first MiB to the end of
// the usable space, and one filesystem inside it:
//
//   - partition type GUID: one per volume (below), so the purpose shows in any partitioning tool;
//   - partition name (PARTLABEL): "cairn-<volume>-<cluster ID>", volume being state, ephemeral or etcd.
//     A GPT name holds 36 UTF-16 units, so a long cluster ID is cut to fit (16 characters always fit, 20
//     for every volume but ephemeral); the same cut is applied when comparing, and two clusters would have
//     to share the first 20 characters of a random ID to be confused;
//   - filesystem label: CAIRN_STATE, CAIRN_EPHEM or CAIRN_ETCD (xfs labels hold 12 bytes, so no cluster ID);
//   - filesystem UUID and partition GUID: random.
//
// A disk is Cairn's own for a volume of a cluster only when all of it holds: a healthy GPT and nothing else
// on the disk, one partition, Cairn's type GUID for that volume, the name for that volume and cluster, and
// inside either Cairn's filesystem label on xfs/ext4, or on a LUKS2 header for an encrypted STATE (keep), or
// nothing at all (a format interrupted before
// mkfs, which is resumed). Anything less is someone else's data.

// Volume is one of the places Cairn keeps data on disk.
type Volume string

// Volumes, in the order they are planned and mounted (EPHEMERAL at /var before ETCD at /var/lib/etcd).
const (
	State     Volume = "STATE"
	Ephemeral Volume = "EPHEMERAL"
	Etcd      Volume = "ETCD"
)

type volumeInfo struct {
	name     string // in partition names and config field paths
	fsLabel  string
	partType string
	target   string
}

var volumes = map[Volume]volumeInfo{
	State:     {name: "state", fsLabel: "CAIRN_STATE", partType: "98730738-508b-4835-8582-152ba18a2207", target: "/system/state"},
	Ephemeral: {name: "ephemeral", fsLabel: "CAIRN_EPHEM", partType: "4f7e15e2-5155-4e2b-aace-3a4738c427bc", target: "/var"},
	Etcd:      {name: "etcd", fsLabel: "CAIRN_ETCD", partType: "c4d1bf0c-ea53-4981-9ef2-331d989b00bc", target: "/var/lib/etcd"},
}

// Field is the machine-config path of the volume's disk, e.g. machine.disks.etcd.
func (v Volume) Field() string { return "machine.disks." + volumes[v].name }

// FSLabel is the filesystem label Cairn gives the volume.
func (v Volume) FSLabel() string { return volumes[v].fsLabel }

// PartitionType is the GPT partition type GUID of the volume.
func (v Volume) PartitionType() string { return volumes[v].partType }

// DefaultTarget is where the volume is mounted.
func (v Volume) DefaultTarget() string { return volumes[v].target }

const namePrefix = "cairn-"

// PartitionName is the GPT partition name for the volume of the cluster: cairn-<volume>-<clusterID>, the
// cluster ID cut to fit.
func PartitionName(v Volume, clusterID string) string {
	name, _, err := gpt.FitName(namePrefix+volumes[v].name+"-", clusterID)
	if err != nil {
		// Cannot happen: the longest prefix, "cairn-ephemeral-", leaves 20 units.
		panic(err)
	}
	return name
}

// Label is a Cairn label read back from a partition.
type Label struct {
	Volume  Volume `json:"volume"`
	Cluster string `json:"cluster"` // as stored: possibly cut to fit the partition name
	// Problem is set when the type GUID is Cairn's but the name does not read as a Cairn label.
	Problem string `json:"problem,omitempty"`
}

// ParseLabel reads the Cairn label of a partition. ok is false when the partition is not Cairn's at all.
func ParseLabel(p inventory.Partition) (l Label, ok bool) {
	for v, info := range volumes {
		if !strings.EqualFold(p.Type, info.partType) {
			continue
		}
		prefix := namePrefix + info.name + "-"
		if !strings.HasPrefix(p.Label, prefix) || len(p.Label) == len(prefix) {
			return Label{Volume: v, Problem: "partition name " + quoteOrEmpty(p.Label) + " is not " + prefix + "<cluster ID>"}, true
		}
		return Label{Volume: v, Cluster: strings.TrimPrefix(p.Label, prefix)}, true
	}
	return Label{}, false
}

// IsCluster reports whether the label was written for clusterID (comparing the cut form).
func (l Label) IsCluster(clusterID string) bool {
	return l.Problem == "" && PartitionName(l.Volume, clusterID) == namePrefix+volumes[l.Volume].name+"-"+l.Cluster
}

// ownership is what the planner needs to know about a disk that carries a Cairn label.
type ownership struct {
	label     Label
	partition inventory.Partition
}

// cairnPartition returns the Cairn-labelled partition of a disk whose whole content is exactly one healthy
// GPT with one partition; ok is false for anything else.
func cairnPartition(d inventory.Disk) (ownership, bool) {
	if len(d.Signatures) != 1 {
		return ownership{}, false
	}
	s := d.Signatures[0]
	if s.Type != probe.TypeGPT || s.Problem != "" || len(s.Partitions) != 1 || len(d.Partitions) != 1 {
		return ownership{}, false
	}
	l, ok := ParseLabel(d.Partitions[0])
	if !ok {
		return ownership{}, false
	}
	return ownership{label: l, partition: d.Partitions[0]}, true
}

// holdsCairnFS reports whether the partition holds exactly Cairn's filesystem for the volume.
func holdsCairnFS(p inventory.Partition, v Volume) (fstype string, ok bool) {
	if len(p.Signatures) != 1 {
		return "", false
	}
	s := p.Signatures[0]
	if s.Problem != "" || s.Label != v.FSLabel() {
		return "", false
	}
	switch {
	case s.Type == probe.TypeXFS || s.Type == probe.TypeExt4:
	case s.Type == probe.TypeLUKS && s.Version == "2" && v == State:
		// An encrypted STATE: the LUKS2 header carries the label; the filesystem inside is checked once
		// the volume is open (apply).
	default:
		return "", false
	}
	return s.Type, true
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "(empty)"
	}
	return `"` + s + `"`
}

// OwnPartition returns the partition of d that carries the label of volume v of cluster clusterID, when d is
// laid out exactly as Cairn leaves it. fstype is the filesystem inside, "" while the partition is still
// empty; ok is false when the disk is anything else, including this label with a foreign filesystem inside.
func OwnPartition(d inventory.Disk, v Volume, clusterID string) (p inventory.Partition, fstype string, ok bool) {
	own, found := cairnPartition(d)
	if !found || own.label.Volume != v || !own.label.IsCluster(clusterID) {
		return inventory.Partition{}, "", false
	}
	if fstype, ok := holdsCairnFS(own.partition, v); ok {
		return own.partition, fstype, true
	}
	if len(own.partition.Signatures) == 0 {
		return own.partition, "", true
	}
	return inventory.Partition{}, "", false
}

// Fingerprint is what the plan saw on a disk, in a form that compares equal only when nothing changed: the
// disk's identity, every signature and every partition's contents. The kernel's names for partitions are
// left out, since re-reading the table may add them without anything on the disk changing.
func Fingerprint(d inventory.Disk) string {
	type part struct {
		Number      int
		Start, Size uint64
		Type, UUID  string
		Label       string
		Signatures  []probe.Signature
	}
	v := struct {
		Size        uint64
		Serial, WWN string
		Signatures  []probe.Signature
		Partitions  []part
		ProbeError  string
	}{Size: d.Size, Serial: d.Serial, WWN: d.WWN, Signatures: d.Signatures, ProbeError: d.ProbeError}
	for _, p := range d.Partitions {
		v.Partitions = append(v.Partitions, part{p.Number, p.Start, p.Size, p.Type, p.UUID, p.Label, p.Signatures})
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain strings and numbers are marshalled.
		panic(err)
	}
	return string(b)
}
