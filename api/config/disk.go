package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// TmpfsVolume is the scalar that asks for a RAM-backed volume instead of a disk.
const TmpfsVolume = "tmpfs"

// Filesystems Cairn formats.
const (
	FilesystemXFS  = "xfs"
	FilesystemExt4 = "ext4"
)

// diskSpecFields is DiskSpec without its YAML methods, so decoding the mapping form does not recurse.
type diskSpecFields DiskSpec

// UnmarshalYAML accepts the scalar `tmpfs` or a mapping of selector fields.
func (d *DiskSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != TmpfsVolume {
			return fmt.Errorf("line %d: a disk is either %q or a mapping of selector fields, not %q", n.Line, TmpfsVolume, n.Value)
		}
		*d = DiskSpec{Tmpfs: true}
		return nil
	}
	var f diskSpecFields
	if err := n.Decode(&f); err != nil {
		return err
	}
	*d = DiskSpec(f)
	return nil
}

// MarshalYAML writes the scalar form for tmpfs volumes.
func (d DiskSpec) MarshalYAML() (any, error) {
	if d.Tmpfs {
		return TmpfsVolume, nil
	}
	return diskSpecFields(d), nil
}

// IsZero reports whether the selector selects nothing at all.
func (s Selector) IsZero() bool { return s == Selector{} }

// SelectorKeys are the fields of a selector's text form, KEY=VALUE[,KEY=VALUE] (cairnctl's --disk flags).
const SelectorKeys = "path, serial, model, wwn, label, minSize, maxSize"

// Set sets the field of the selector's text form named key; ok is false when key names no selector field.
func (s *Selector) Set(key, value string) (ok bool, err error) {
	switch key {
	case "path":
		s.Path = value
	case "serial":
		s.Serial = value
	case "model":
		s.Model = value
	case "wwn":
		s.WWN = value
	case "label":
		s.Label = value
	case "minSize":
		s.MinSize, err = ParseSize(value)
	case "maxSize":
		s.MaxSize, err = ParseSize(value)
	default:
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("%s: %w", key, err)
	}
	return true, nil
}

// IsZero shadows the Selector's promoted method, which the YAML encoder would otherwise use to drop a
// `tmpfs` volume as empty.
func (d DiskSpec) IsZero() bool {
	return !d.Tmpfs && d.Selector.IsZero() && d.Filesystem == "" && !d.Wipe && d.Encryption == ""
}

// FilesystemOrDefault is the filesystem Cairn formats this volume with.
func (d DiskSpec) FilesystemOrDefault() string {
	if d.Filesystem == "" {
		return FilesystemXFS
	}
	return d.Filesystem
}
