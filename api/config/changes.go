package config

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Redacted is what stands in for a secret in a config shown to a user.
const Redacted = "REDACTED"

// Redact returns a copy of c with every secret replaced by Redacted: the CAs' and the service accounts'
// private keys, the bootstrap and join tokens, registry passwords. Certificates stay: they are public.
func Redact(c *MachineConfig) (*MachineConfig, error) {
	out, err := clone(c)
	if err != nil {
		return nil, err
	}
	if s := out.Cluster.Secrets; s != nil {
		for _, ck := range []*CertKey{&s.MachineCA, &s.KubernetesCA, &s.EtcdCA, &s.FrontProxyCA} {
			ck.Key = redact(ck.Key)
		}
		s.ServiceAccountKey, s.BootstrapToken = redact(s.ServiceAccountKey), redact(s.BootstrapToken)
	}
	if j := out.Cluster.Join; j != nil {
		j.Token = redact(j.Token)
	}
	for host, r := range out.Machine.Registries {
		r.Password = redact(r.Password)
		out.Machine.Registries[host] = r
	}
	return out, nil
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return Redacted
}

func clone(c *MachineConfig) (*MachineConfig, error) {
	data, err := Marshal(c)
	if err != nil {
		return nil, err
	}
	var out MachineConfig
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Effect is what changing a config path takes on a running node.
type Effect string

const (
	// Live: machined re-renders and restarts what uses it, without a reboot.
	Live Effect = "live"
	// Reboot: the change takes effect at the node's next boot.
	Reboot Effect = "reboot"
	// Immutable: fixed at Init or Join; changing it means a reset and a new Init or Join.
	Immutable Effect = "immutable"
)

// effects is the one table of what a change of each config path takes, by path prefix (the longest
// prefix that matches decides). A path missing here is immutable: a new field is refused until someone
// decides how it may change.
var effects = []struct {
	prefix string
	effect Effect
	why    string
}{
	{"apiVersion", Immutable, "the document's version"},
	{"kind", Immutable, "the document's kind"},
	{"bootstrap", Live, "read only from a platform's user data, before the node's first Init"},
	{"machine.type", Immutable, "the node's role"},
	{"machine.disks", Immutable, "the volumes were formatted and are found by these selectors"},
	{"machine.hostname", Reboot, "the node's name is its Kubernetes Node and its certificates' name"},
	{"machine.certSANs", Reboot, "the machine-API certificate is re-issued at boot"},
	{"machine.network", Live, "applied over the running network (bonds and VLANs once made are kept until a reboot)"},
	{"machine.time", Live, "the SNTP client's servers"},
	{"machine.kubelet", Live, "the kubelet's config and flags; the kubelet restarts"},
	{"machine.nodeLabels", Live, "a control plane updates the Node within a minute"},
	{"machine.nodeTaints", Live, "a control plane updates the Node within a minute"},
	{"machine.registries", Live, "containerd's hosts.toml; containerd re-reads it per pull"},
	{"machine.upgrade", Live, "read by each upgrade"},
	{"machine.install", Live, "read by each install"},
	{"machine.tpm", Live, "read at each boot's measurement of the lock"},
	{"cluster.name", Immutable, "in every certificate and kubeconfig of the cluster"},
	{"cluster.id", Immutable, "in every Cairn disk label of the cluster"},
	{"cluster.endpoint", Immutable, "in every kubeconfig and certificate of the cluster"},
	{"cluster.vip", Immutable, "the endpoint's address, in every kubeconfig and certificate of the cluster"},
	{"cluster.kubernetesVersion", Immutable, "changed by an upgrade, not a config"},
	{"cluster.network", Immutable, "the pod and service ranges every node and Service was given"},
	{"cluster.machineCA", Immutable, "the cluster's trust root"},
	{"cluster.secrets", Immutable, "the cluster's CAs and keys"},
	{"cluster.join", Live, "where this node finds join services"},
	{"cluster.joinAttestation", Live, "read by this control plane's join service at each ticket request"},
	{"cluster.apiServer", Live, "the static pod is re-rendered and restarted"},
	{"cluster.controllerManager", Live, "the static pod is re-rendered and restarted"},
	{"cluster.scheduler", Live, "the static pod is re-rendered and restarted"},
	{"cluster.etcd", Live, "the static pod is re-rendered and restarted"},
	{"cluster.proxy", Live, "the kube-proxy add-on is applied again"},
	{"cluster.coreDNS", Live, "the CoreDNS add-on is applied again"},
}

// Change is one changed config path and what changing it takes.
type Change struct {
	Path   string
	Effect Effect
	Why    string
}

// EffectOf classifies one config path.
func EffectOf(path string) (Effect, string) {
	best, effect, why := -1, Immutable, "no rule says how it may change on a running node"
	for _, e := range effects {
		if (path == e.prefix || strings.HasPrefix(path, e.prefix+".") || strings.HasPrefix(path, e.prefix+"[")) && len(e.prefix) > best {
			best, effect, why = len(e.prefix), e.effect, e.why
		}
	}
	return effect, why
}

// Changes lists the paths whose values differ between old and new (as their YAML says them), each with
// what changing it takes, sorted by path.
func Changes(old, new *MachineConfig) ([]Change, error) {
	a, err := flatten(old)
	if err != nil {
		return nil, err
	}
	b, err := flatten(new)
	if err != nil {
		return nil, err
	}
	var paths []string
	for p, v := range a {
		if w, ok := b[p]; !ok || w != v {
			paths = append(paths, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	out := make([]Change, 0, len(paths))
	for _, p := range paths {
		e, why := EffectOf(p)
		out = append(out, Change{Path: p, Effect: e, Why: why})
	}
	return out, nil
}

// flatten maps every leaf of c's YAML to its path: machine.network.interfaces[0].addresses[1].
func flatten(c *MachineConfig) (map[string]string, error) {
	data, err := Marshal(c)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	out := map[string]string{}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, w := range x {
				walk(join(path, k), w)
			}
		case []any:
			for i, w := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), w)
			}
		default:
			out[path] = fmt.Sprint(x)
		}
	}
	walk("", doc)
	return out, nil
}
