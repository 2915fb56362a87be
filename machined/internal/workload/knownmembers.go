package workload

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"

	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/machined/internal/atomicfile"
)

// The control planes this node last knew, kept on STATE (in /etc/kubernetes, which persistKubernetesDir
// puts there). A booting control plane's etcd reaches its peers by name before any API or etcd answers
// to say where they are; without this record a node would know only the control planes its join ticket
// named (none, for the first one), and a cluster whose control planes all restart at once (a power cut)
// would never find its quorum.

// knownMembersFile is the record's name in /etc/kubernetes.
const knownMembersFile = "cairn-control-planes.json"

type knownMember struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// saveMembers records members. A failure is logged: the names in /etc/hosts are current either way.
func (w *Workload) saveMembers(members []*machine.Member) {
	r := w.Renderer()
	if r == nil || w.StateDir == nil {
		return // sandbox mode and unit tests: nothing persists /etc/kubernetes
	}
	var out []knownMember
	for _, m := range members {
		if m.Name != "" && m.Address != "" {
			out = append(out, knownMember{Name: m.Name, Address: m.Address})
		}
	}
	data, err := json.Marshal(out)
	if err == nil {
		err = atomicfile.WriteFile(r.Layout().KubernetesFile(knownMembersFile), data, 0o644)
	}
	if err != nil {
		w.Log.Warn("could not record the control planes for the next boot", "err", err)
	}
}

// savedMembers are the members saveMembers recorded (none before the first record).
func (w *Workload) savedMembers() []*machine.Member {
	r := w.Renderer()
	if r == nil {
		return nil
	}
	data, err := os.ReadFile(r.Layout().KubernetesFile(knownMembersFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var known []knownMember
	if err == nil {
		err = json.Unmarshal(data, &known)
	}
	if err != nil {
		w.Log.Warn("the control planes recorded at the last boot are unreadable; using the join ticket's", "err", err)
		return nil
	}
	out := make([]*machine.Member, 0, len(known))
	for _, k := range known {
		out = append(out, &machine.Member{Name: k.Name, Address: k.Address, ControlPlane: true})
	}
	return out
}
