package cluster

import (
	"path/filepath"
	"sort"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// Info is a cluster as `cluster list` shows it: its recorded state and what is true now.
type Info struct {
	Name    string     `json:"name"`
	Dir     string     `json:"dir"`
	Mode    qemu.Mode  `json:"mode,omitempty"`
	Group   string     `json:"group,omitempty"`
	Created time.Time  `json:"created"`
	Nodes   []NodeInfo `json:"nodes"`
	// Error is set when the state file cannot be read (a create that died early): destroy still works.
	Error string `json:"error,omitempty"`
}

// NodeInfo is one node: its recorded state, whether its QEMU runs, and how to reach its API.
type NodeInfo struct {
	NodeState
	Dir         string `json:"dir"`
	Console     string `json:"console"`
	APIEndpoint string `json:"apiEndpoint"`
	Running     bool   `json:"running"`
	PID         int    `json:"pid,omitempty"`
	// Fingerprint is the maintenance certificate's, from the console of the node's current boot.
	Fingerprint string `json:"fingerprint,omitempty"`
}

// Inspect lists every cluster under root with its nodes' live state.
func Inspect(root string) ([]Info, error) {
	states, broken, err := List(root)
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, s := range states {
		dir := Dir(root, s.Name)
		ci := Info{Name: s.Name, Dir: dir, Mode: s.Mode, Group: s.Group, Created: s.Created}
		for _, n := range s.Nodes {
			nd := NodeDir(dir, n.Name)
			ni := NodeInfo{NodeState: n, Dir: nd, Console: filepath.Join(nd, qemu.ConsoleLog), APIEndpoint: n.APIEndpoint()}
			ni.PID, ni.Running = qemu.Running(nd)
			if ni.Running {
				ni.Fingerprint, _ = ConsoleFingerprint(ni.Console, 0)
			}
			ci.Nodes = append(ci.Nodes, ni)
		}
		out = append(out, ci)
	}
	for name, err := range broken {
		out = append(out, Info{Name: name, Dir: Dir(root, name), Error: err.Error()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
