package probe

import (
	"fmt"
	"strings"

	"github.com/cairn-os/cairn/api/config"
)

// String describes the signature for an operator, e.g. `ext4 filesystem labelled "data", UUID 3f...`.
func (s Signature) String() string {
	var b strings.Builder
	b.WriteString(s.what())
	if s.Label != "" {
		fmt.Fprintf(&b, " labelled %q", s.Label)
	}
	if s.UUID != "" {
		fmt.Fprintf(&b, ", UUID %s", s.UUID)
	}
	// The offset matters only where it is not the format's usual place: a backup copy, stray data.
	if s.Problem != "" || s.Type == TypeUnknown {
		fmt.Fprintf(&b, ", at byte %d", s.Offset)
	}
	if len(s.Partitions) > 0 {
		parts := make([]string, len(s.Partitions))
		for i, p := range s.Partitions {
			parts[i] = p.String()
		}
		fmt.Fprintf(&b, ", partitions: %s", strings.Join(parts, "; "))
	} else if s.Kind == KindPartitionTable && s.Problem == "" {
		b.WriteString(", no partitions")
	}
	if s.Problem != "" {
		fmt.Fprintf(&b, " (%s)", s.Problem)
	}
	return b.String()
}

func (s Signature) what() string {
	switch s.Type {
	case TypeGPT:
		return "GPT partition table"
	case TypeDOS:
		return "DOS/MBR partition table"
	case TypeLUKS:
		return "LUKS" + s.Version + " encrypted volume"
	case TypeLVM2:
		return "LVM2 physical volume"
	case TypeMD:
		return "MD RAID member (metadata " + s.Version + ")"
	case TypeSwap:
		return "swap space"
	case TypeSuspend:
		return "hibernation image in swap space"
	case TypeVFAT:
		return "vfat (" + s.Version + ") filesystem"
	case TypeJBD:
		return "ext3/4 external journal"
	case TypeSquashfs:
		return "squashfs " + s.Version + " image"
	case TypeISO9660:
		return "ISO9660 image"
	case TypeUnknown:
		return "unrecognised data"
	}
	return s.Type + " filesystem"
}

// String describes a partition entry, e.g. `#1 "cairn-etcd-abc" 1GiB at 1MiB`.
func (p Partition) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d", p.Number)
	if p.Name != "" {
		fmt.Fprintf(&b, " %q", p.Name)
	}
	fmt.Fprintf(&b, " type %s, %s at %s", p.Type, config.Size(p.Size), config.Size(p.Start))
	return b.String()
}

// Describe joins the descriptions of several signatures; "nothing (blank)" for none.
func Describe(sigs []Signature) string {
	if len(sigs) == 0 {
		return "nothing (blank)"
	}
	out := make([]string, len(sigs))
	for i, s := range sigs {
		out[i] = s.String()
	}
	return strings.Join(out, " and ")
}
