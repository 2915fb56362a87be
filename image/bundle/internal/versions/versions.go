// Package versions reads versions.env, the one file that pins every input of
// the Kubernetes bundle.
package versions

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Versions are the pinned inputs of the bundle.
type Versions struct {
	Kubernetes string // v1.37.2
	Etcd       string // v3.6.16
	Containerd string // v2.4.2
	Runc       string // v1.3.6
	CNIPlugins string // v1.9.1
	CoreDNS    string // v1.15.0
	Flannel    string // v0.28.10
	PauseTag   string // 3.10.2
}

var semver = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

// fields maps each key of versions.env to its field and the check it needs.
func (v *Versions) fields() map[string]struct {
	dst    *string
	semver bool
} {
	type f = struct {
		dst    *string
		semver bool
	}
	return map[string]f{
		"KUBERNETES_VERSION":  {&v.Kubernetes, true},
		"ETCD_VERSION":        {&v.Etcd, true},
		"CONTAINERD_VERSION":  {&v.Containerd, true},
		"RUNC_VERSION":        {&v.Runc, true},
		"CNI_PLUGINS_VERSION": {&v.CNIPlugins, true},
		"COREDNS_VERSION":     {&v.CoreDNS, true},
		"FLANNEL_VERSION":     {&v.Flannel, true},
		"PAUSE_TAG":           {&v.PauseTag, false},
	}
}

// Load reads and validates a versions.env file.
func Load(path string) (Versions, error) {
	f, err := os.Open(path)
	if err != nil {
		return Versions{}, fmt.Errorf("read versions file: %w", err)
	}
	defer f.Close()
	v, err := Parse(f)
	if err != nil {
		return Versions{}, fmt.Errorf("versions file %s: %w", path, err)
	}
	return v, nil
}

// Parse reads KEY=VALUE lines; blank lines and # comments are skipped. Every
// problem is reported at once so a bad edit is fixed in one go.
func Parse(r io.Reader) (Versions, error) {
	var v Versions
	fields := v.fields()
	seen := map[string]bool{}
	var problems []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			problems = append(problems, fmt.Sprintf("line %d: want KEY=VALUE, got %q", n, line))
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		f, known := fields[key]
		switch {
		case !known:
			problems = append(problems, fmt.Sprintf("line %d: unknown key %s", n, key))
		case seen[key]:
			problems = append(problems, fmt.Sprintf("line %d: %s set twice", n, key))
		case f.semver && !semver.MatchString(value):
			problems = append(problems, fmt.Sprintf("line %d: %s=%q is not a vMAJOR.MINOR.PATCH version", n, key, value))
		case value == "":
			problems = append(problems, fmt.Sprintf("line %d: %s is empty", n, key))
		default:
			*f.dst = value
		}
		seen[key] = true
	}
	if err := sc.Err(); err != nil {
		return Versions{}, err
	}
	for _, key := range sortedKeys(fields) {
		if !seen[key] {
			problems = append(problems, "missing "+key)
		}
	}
	if len(problems) > 0 {
		return Versions{}, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return v, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// KubeMajorMinor splits the Kubernetes version into its major and minor
// numbers, as the version ldflags want them ("1", "37").
func (v Versions) KubeMajorMinor() (string, string) {
	m := semver.FindStringSubmatch(v.Kubernetes)
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}

// StagingVersion is the version of the k8s.io staging modules (k8s.io/api,
// ...) published with this Kubernetes release: v1.37.2 -> v0.37.2.
func (v Versions) StagingVersion() string {
	m := semver.FindStringSubmatch(v.Kubernetes)
	if m == nil {
		return ""
	}
	return "v0." + m[2] + "." + m[3]
}

// EtcdImageTag is the tag kubeadm gives etcd images: v3.6.16 -> 3.6.16-0.
func (v Versions) EtcdImageTag() string {
	return strings.TrimPrefix(v.Etcd, "v") + "-0"
}
