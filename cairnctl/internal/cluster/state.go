package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// Files in a cluster's directory.
const (
	StateFile       = "cluster.json"
	SecretsFile     = "secrets.yaml"
	ControlPlaneCfg = "controlplane.yaml"
	WorkerCfg       = "worker.yaml"
	CairnConfigFile = "cairnconfig"
	KubeconfigFile  = "kubeconfig"
	NodeConfigFile  = "config.yaml" // in each node's directory
	nodesDir        = "nodes"
)

// State is what cluster create records so that list, destroy and the user find the cluster again.
type State struct {
	Name    string      `json:"name"`
	Created time.Time   `json:"created"`
	Mode    qemu.Mode   `json:"mode"`
	Group   string      `json:"group"`
	Nodes   []NodeState `json:"nodes"`
	// VIP is the cluster's API virtual IP (Layout.VIP), if it has one.
	VIP netip.Addr `json:"vip,omitzero"`
	// TPM: every node has an emulated TPM 2.0 (swtpm).
	TPM bool `json:"tpm,omitempty"`
}

// NodeState is one node: its plan, its VM and how to reach it from the host.
type NodeState struct {
	Node
	Memory int `json:"memory"` // MiB
	CPUs   int `json:"cpus"`
	// Token is the bootstrap token given on the kernel command line (maintenance API).
	Token string `json:"token"`
	// Ports maps guest TCP ports to the host ports on 127.0.0.1 that QEMU forwards to them.
	Ports map[int]int `json:"ports"`
}

// Dir is a cluster's directory under the clusters root.
func Dir(root, name string) string { return filepath.Join(root, name) }

// NodeDir is a node's directory: its VM's disks, console log and pid file, and its machine config.
func NodeDir(clusterDir, node string) string { return filepath.Join(clusterDir, nodesDir, node) }

// APIEndpoint is the host address of the node's machine API.
func (n NodeState) APIEndpoint() string { return fmt.Sprintf("127.0.0.1:%d", n.Ports[qemu.APIPort]) }

// DefaultRoot is ~/.cairn/clusters. Without $HOME (a CI job, a service) the account's home from the
// user database is used; with neither, the caller must pass a directory.
func DefaultRoot() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		u, uerr := user.Current()
		if uerr != nil || u.HomeDir == "" {
			return "", errors.New("no home directory ($HOME is unset and the user database has none): pass --state-dir")
		}
		home = u.HomeDir
	}
	return filepath.Join(home, ".cairn", "clusters"), nil
}

// Save writes the state file atomically (write, then rename): a destroy that runs while create is
// still going reads either the old or the new list of nodes, never half of one.
func (s *State) Save(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write cluster state %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, StateFile)); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}

// Load reads a cluster's state file.
func Load(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read cluster state %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &s, nil
}

// List loads every cluster under root, by name. A directory without a readable state file is listed
// with its error, so a half-created cluster still shows up (and can be destroyed).
func List(root string) ([]*State, map[string]error, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list clusters in %s: %w", root, err)
	}
	var out []*State
	broken := map[string]error{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		s, err := Load(filepath.Join(root, e.Name()))
		if err != nil {
			broken[e.Name()] = err
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, broken, nil
}
