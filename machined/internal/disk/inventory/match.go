package inventory

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/api/config"
)

// Match returns the one candidate disk that fits every field set in sel. It fails when none or several
// fit, naming what was looked for and the disks seen, so an operator can fix the selector from the error
// alone. Disks that are not candidates (boot medium, read-only, in use) are never returned.
func Match(disks []Disk, sel config.Selector) (Disk, error) {
	if sel == (config.Selector{}) {
		return Disk{}, fmt.Errorf("empty disk selector: set at least one of path, serial, model, wwn, label, minSize, maxSize")
	}
	var found, excluded []Disk
	for _, d := range disks {
		if !matches(d, sel) {
			continue
		}
		if d.NotCandidate != "" {
			excluded = append(excluded, d)
			continue
		}
		found = append(found, d)
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return Disk{}, fmt.Errorf("%d disks match %s: %s; add a serial, wwn or path to the selector to pick one",
			len(found), DescribeSelector(sel), describeDisks(found))
	case len(excluded) > 0:
		var why []string
		for _, d := range excluded {
			why = append(why, d.Path+" is "+d.NotCandidate)
		}
		return Disk{}, fmt.Errorf("no usable disk matches %s: %s, so it cannot be used", DescribeSelector(sel), strings.Join(why, "; "))
	}
	var candidates []Disk
	for _, d := range disks {
		if d.NotCandidate == "" {
			candidates = append(candidates, d)
		}
	}
	if len(candidates) == 0 {
		return Disk{}, fmt.Errorf("no disk matches %s: this node has no candidate disks", DescribeSelector(sel))
	}
	return Disk{}, fmt.Errorf("no disk matches %s; candidate disks: %s", DescribeSelector(sel), describeDisks(candidates))
}

func matches(d Disk, sel config.Selector) bool {
	if sel.Path != "" && !hasPath(d, sel.Path) {
		return false
	}
	if sel.Serial != "" && strings.TrimSpace(sel.Serial) != d.Serial {
		return false
	}
	if sel.Model != "" && strings.TrimSpace(sel.Model) != d.Model {
		return false
	}
	if sel.WWN != "" && (d.WWN == "" || NormalizeWWN(sel.WWN) != NormalizeWWN(d.WWN)) {
		return false
	}
	if sel.Label != "" && !hasLabel(d, sel.Label) {
		return false
	}
	if sel.MinSize != 0 && d.Size < uint64(sel.MinSize) {
		return false
	}
	if sel.MaxSize != 0 && d.Size > uint64(sel.MaxSize) {
		return false
	}
	return true
}

func hasPath(d Disk, p string) bool {
	p = filepath.Clean(p)
	if p == d.Path {
		return true
	}
	for _, id := range d.ByID {
		if p == id {
			return true
		}
	}
	return false
}

// hasLabel: a filesystem label on the disk or one of its partitions, or a GPT partition name.
func hasLabel(d Disk, label string) bool {
	for _, s := range d.Signatures {
		if s.Label == label {
			return true
		}
	}
	for _, p := range d.Partitions {
		if p.Label == label {
			return true
		}
		for _, s := range p.Signatures {
			if s.Label == label {
				return true
			}
		}
	}
	return false
}

// DescribeSelector prints the fields that are set, in the config's own words: {serial: "x", minSize: 10GiB}.
func DescribeSelector(sel config.Selector) string {
	var f []string
	add := func(k, v string) {
		if v != "" {
			f = append(f, fmt.Sprintf("%s: %q", k, v))
		}
	}
	add("path", sel.Path)
	add("serial", sel.Serial)
	add("model", sel.Model)
	add("wwn", sel.WWN)
	add("label", sel.Label)
	if sel.MinSize != 0 {
		f = append(f, "minSize: "+sel.MinSize.String())
	}
	if sel.MaxSize != 0 {
		f = append(f, "maxSize: "+sel.MaxSize.String())
	}
	return "{" + strings.Join(f, ", ") + "}"
}

// Describe prints a disk the way errors name it: /dev/vdb (20GiB, serial "etcd0", model "QEMU HARDDISK").
func (d Disk) Describe() string {
	f := []string{HumanSize(d.Size)}
	if d.Serial != "" {
		f = append(f, fmt.Sprintf("serial %q", d.Serial))
	}
	if d.Model != "" {
		f = append(f, fmt.Sprintf("model %q", d.Model))
	}
	if d.WWN != "" {
		f = append(f, "wwn "+d.WWN)
	}
	return d.Path + " (" + strings.Join(f, ", ") + ")"
}

func describeDisks(ds []Disk) string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Describe()
	}
	return strings.Join(out, ", ")
}

// HumanSize prints a byte count in binary units with at most one decimal: 20GiB, 523.1MiB.
func HumanSize(b uint64) string {
	v := float64(b)
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.mult {
			return strings.TrimSuffix(strconv.FormatFloat(v/u.mult, 'f', 1, 64), ".0") + u.suffix
		}
	}
	return strconv.FormatUint(b, 10) + "B"
}
