package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// A node's labels and taints are the operator's, kept in its config, so a node that is reset and joins
// again, or is replaced, comes back with them. A kubelet may not set them itself under NodeRestriction
// (it may not change taints at all, nor most labels in the kubernetes.io namespaces), so the node asks
// and a control plane applies (machined/internal/workload/nodespec.go).

// NodeTaint is a taint on the node's Node: key, optional value, effect.
type NodeTaint struct {
	Key    string `yaml:"key" json:"key"`
	Value  string `yaml:"value,omitempty" json:"value,omitempty"`
	Effect string `yaml:"effect" json:"effect"`
}

// String is the taint as kubectl spells it: key[=value]:Effect.
func (t NodeTaint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Taint effects Kubernetes knows.
var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// RestrictedLabelPrefix is the namespace NodeRestriction keeps from nodes: labels that let an admin
// steer workloads to nodes a compromised node cannot claim to be. The node's config cannot set them,
// since a control plane applies what the node asks for.
const RestrictedLabelPrefix = "node-restriction.kubernetes.io/"

// ControlPlaneLabels mark a Node as a control plane. Cairn puts the first on its control planes itself, and
// the cluster's machines find their control planes by it (the discovery names), so no config may ask for
// either: a worker that could would be taken for a control plane.
var ControlPlaneLabels = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// CheckNodeLabel says what is wrong with one label, "" when nothing is.
func CheckNodeLabel(key, value string) string {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Sprintf("%q is not a label key: %s", key, strings.Join(errs, "; "))
	}
	if slices.Contains(ControlPlaneLabels, key) {
		return fmt.Sprintf("%q marks control planes: Cairn puts it on them itself, and no config may ask for it", key)
	}
	if restrictedLabel(key) {
		return fmt.Sprintf("%q is in the %s namespace, which nodes may not set (NodeRestriction): label the Node with kubectl as an admin", key, RestrictedLabelPrefix)
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return fmt.Sprintf("value %q of label %s: %s", value, key, strings.Join(errs, "; "))
	}
	return ""
}

// restrictedLabel: the key's prefix is node-restriction.kubernetes.io or one of its subdomains.
func restrictedLabel(key string) bool {
	prefix, _, named := strings.Cut(key, "/")
	domain := strings.TrimSuffix(RestrictedLabelPrefix, "/")
	return named && (prefix == domain || strings.HasSuffix(prefix, "."+domain))
}

// CheckNodeTaint says what is wrong with one taint, "" when nothing is.
func CheckNodeTaint(t NodeTaint) string {
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return fmt.Sprintf("%q is not a taint key: %s", t.Key, strings.Join(errs, "; "))
	}
	if t.Value != "" {
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Sprintf("value %q of taint %s: %s", t.Value, t.Key, strings.Join(errs, "; "))
		}
	}
	for _, e := range taintEffects {
		if t.Effect == e {
			return ""
		}
	}
	return fmt.Sprintf("effect %q of taint %s must be one of %s", t.Effect, t.Key, strings.Join(taintEffects, ", "))
}

func validateNodeSpec(m *Machine, e *Errors) {
	keys := make([]string, 0, len(m.NodeLabels))
	for k := range m.NodeLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if msg := CheckNodeLabel(k, m.NodeLabels[k]); msg != "" {
			e.add("machine.nodeLabels."+k, "%s", msg)
		}
	}
	seen := map[string]bool{}
	for i, t := range m.NodeTaints {
		if msg := CheckNodeTaint(t); msg != "" {
			e.add(indexPath("machine.nodeTaints", i), "%s", msg)
			continue
		}
		// Kubernetes refuses two taints with the same key and effect.
		if id := t.Key + ":" + t.Effect; seen[id] {
			e.add(indexPath("machine.nodeTaints", i), "taint %s is listed twice with effect %s", t.Key, t.Effect)
		} else {
			seen[id] = true
		}
	}
}
