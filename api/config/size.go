package config

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Size is a byte count written as a number with an optional unit: 512MiB, 10GiB, 1.5TB, 4096.
type Size uint64

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	// Longest suffixes first so "GiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize reads a size such as "10GiB".
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("invalid size %q: want a number with an optional unit such as 512MiB or 10GiB", s)
	}
	return Size(f * mult), nil
}

// String prints the size with the largest binary unit that keeps it readable.
func (s Size) String() string {
	v := float64(s)
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.mult {
			return strconv.FormatFloat(v/u.mult, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatUint(uint64(s), 10) + "B"
}

// UnmarshalYAML accepts both numbers and strings with units.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseSize(n.Value)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// MarshalYAML writes the readable form.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }
