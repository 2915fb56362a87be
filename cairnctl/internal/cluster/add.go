package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// AddOptions are the inputs of `cairnctl cluster add`.
type AddOptions struct {
	Name     string
	Root     string
	ImageDir string
	Role     string // worker or controlplane
	// SelfJoin boots the node with the join service, a join token and the machine CA's hash on its
	// kernel command line (cairn.join=, cairn.jointoken=, cairn.joinca=): it joins by itself, as a node
	// of an autoscaling group would, and nobody sends it a Join. Otherwise the node is joined as
	// `cairnctl join` does.
	SelfJoin bool
	// UserData: the same three values as SelfJoin, in a join document (user data) instead of the kernel
	// command line, with the node's name as its hostname; UserDataNoCloud puts it on a NoCloud seed,
	// UserDataEC2 behind an IMDSv2 metadata service. "": no user data.
	UserData string
	// Memory, CPUs and disk sizes as in CreateOptions (0: the same defaults).
	Memory, CPUs                       int
	StateSize, EphemeralSize, EtcdSize int64
	BootTimeout, SequenceTimeout       time.Duration
	FormatEvent                        func(*machine.Event) string
}

// Add boots one more node for an existing local cluster and joins it, then adds its machine API to the
// cluster's cairnconfig context. It returns the node's state.
func Add(ctx context.Context, o AddOptions, p *Progress) (*NodeState, error) {
	co := CreateOptions{Memory: o.Memory, CPUs: o.CPUs, StateSize: o.StateSize, EphemeralSize: o.EphemeralSize,
		EtcdSize: o.EtcdSize, BootTimeout: o.BootTimeout, SequenceTimeout: o.SequenceTimeout, FormatEvent: o.FormatEvent}.withDefaults()
	dir := Dir(o.Root, o.Name)
	st, err := Load(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no cluster %s in %s: create it first with `cairnctl cluster create --name %s`", o.Name, o.Root, o.Name)
	}
	if err != nil {
		return nil, err
	}
	img, err := FindArtifacts(o.ImageDir, st.Mode)
	if err != nil {
		return nil, err
	}
	ccPath := filepath.Join(dir, CairnConfigFile)
	cc, err := client.LoadConfig(ccPath)
	if err != nil {
		return nil, fmt.Errorf("cluster %s has no client config (was it created with --no-init?): %w", o.Name, err)
	}
	cctx, err := cc.Current(o.Name)
	if err != nil {
		return nil, err
	}
	nodes := make([]Node, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		nodes = append(nodes, n.Node)
	}
	n, err := Grow(o.Name, nodes, o.Role, st.VIP)
	if err != nil {
		return nil, err
	}
	// The default vCPUs follow the cluster's shape with the new node in it.
	for _, m := range append(nodes, n) {
		if m.Role == RoleControlPlane {
			co.ControlPlanes++
		} else {
			co.Workers++
		}
	}
	if err := writeNodeConfig(dir, n); err != nil {
		return nil, err
	}
	first := st.Nodes[0]
	spec := VMSpec{Node: n, Dir: NodeDir(dir, n.Name), Group: st.Group, Mode: st.Mode, Image: img,
		Memory: co.memory(n.Role), CPUs: co.cpus(n.Role), Disks: co.disks(n, false), Token: RandomToken(), TPM: st.TPM}
	if o.SelfJoin && o.UserData != "" {
		return nil, errors.New("--self-join and --userdata are two ways to say the same thing: choose one")
	}
	if err := checkUserDataSource(o.UserData); err != nil {
		return nil, err
	}
	switch {
	case o.SelfJoin:
		if spec.Cmdline, err = selfJoinArgs(ctx, first, n, cctx, co.SequenceTimeout); err != nil {
			return nil, err
		}
	case o.UserData != "":
		j, err := selfJoin(ctx, first, n, cctx, co.SequenceTimeout)
		if err != nil {
			return nil, err
		}
		ud, err := config.JoinUserData(j.endpoint, j.token, j.caHash)
		if err != nil {
			return nil, err
		}
		where, err := giveUserData(ctx, o.UserData, &spec, ud)
		if err != nil {
			return nil, err
		}
		p.Printf("%s: its user data (a join document for %s) is %s", n.Name, j.endpoint, where)
	}
	vm, ns, err := StartVM(ctx, spec)
	if err != nil {
		return nil, err
	}
	st.Nodes = append(st.Nodes, ns)
	if err := st.Save(dir); err != nil {
		return nil, err
	}
	printStarted(p, spec, ns, vm)
	if !slices.Contains(cctx.Endpoints, ns.APIEndpoint()) {
		cctx.Endpoints = append(cctx.Endpoints, ns.APIEndpoint())
		if err := cc.Save(ccPath); err != nil {
			return nil, fmt.Errorf("write %s: %w", ccPath, err)
		}
	}
	// As in create (hang.go): a kernel that hangs ends the waits below with its own words.
	hctx, hung := context.WithCancelCause(ctx)
	defer hung(nil)
	go newHangWatch(n.Name, vm, spec.Mode).run(hctx, hung)
	if err := waitAdded(hctx, o, co, dir, first, ns, vm, cctx, p); err != nil {
		return nil, withHang(hctx, err)
	}
	return &ns, nil
}

// waitAdded waits until the started node is Running: it joins by itself, or it is sent its join.
func waitAdded(ctx context.Context, o AddOptions, co CreateOptions, dir string, first, ns NodeState, vm *qemu.VM, cctx *client.Context, p *Progress) error {
	n := ns.Node
	if o.SelfJoin || o.UserData != "" {
		from := "kernel command line"
		if o.UserData != "" {
			from = "user data from " + o.UserData
		}
		p.Printf("%s: joins by itself through %s:%d (%s); waiting until it is Running", n.Name, first.Address, JoinPort, from)
		if err := waitRunning(ctx, ns, cctx, co.BootTimeout+co.SequenceTimeout, p); err != nil {
			return fmt.Errorf("%w%s\nconsole %s ends with:\n%s", err, vmExit(vm), vm.ConsolePath(), ConsoleTail(vm.ConsolePath(), 2000))
		}
		return nil
	}
	bctx, cancel := context.WithTimeout(ctx, co.BootTimeout)
	b, err := WaitMaintenance(bctx, vm, ns.APIEndpoint(), ns.Token)
	cancel()
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	p.Printf("%s: machine API answers: state %s (API after %.1fs from QEMU's start)", n.Name, b.Status.State, b.API.Seconds())
	return pushJoin(ctx, dir, first, ns, b.Fingerprint, vm, cctx, co.SequenceTimeout, co.FormatEvent, p)
}

// writeNodeConfig writes the new node's config from its role's config in the cluster's directory.
func writeNodeConfig(dir string, n Node) error {
	tmplFile := WorkerCfg
	if n.Role == RoleControlPlane {
		tmplFile = ControlPlaneCfg
	}
	data, err := os.ReadFile(filepath.Join(dir, tmplFile))
	if err != nil {
		return err
	}
	tmpl, err := config.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", tmplFile, err)
	}
	nc, err := NodeConfig(tmpl, n)
	if err != nil {
		return err
	}
	nd := NodeDir(dir, n.Name)
	if err := os.MkdirAll(nd, 0o700); err != nil {
		return err
	}
	return writePrivateYAML(filepath.Join(nd, NodeConfigFile), nc)
}

// selfJoinTarget is what a node needs to join by itself through the first control plane: the join
// service, a single-use join token from its machine API, valid for as long as the join may take, and
// the hash of the machine CA the node pins the join service to.
type selfJoinTarget struct{ endpoint, token, caHash string }

func selfJoin(ctx context.Context, first NodeState, n Node, cctx *client.Context, ttl time.Duration) (selfJoinTarget, error) {
	mc, conn, err := client.Connect(client.Options{Endpoint: first.APIEndpoint(), Context: cctx})
	if err != nil {
		return selfJoinTarget{}, fmt.Errorf("control plane %s: %w", first.Name, err)
	}
	defer conn.Close()
	tok, err := mc.CreateJoinToken(ctx, &machine.CreateJoinTokenRequest{Role: n.Role, TtlSeconds: uint32(ttl / time.Second), Uses: 1})
	if err != nil {
		return selfJoinTarget{}, fmt.Errorf("control plane %s: create a %s join token: %w", first.Name, n.Role, err)
	}
	hash, err := cctx.CAHash()
	if err != nil {
		return selfJoinTarget{}, err
	}
	return selfJoinTarget{endpoint: fmt.Sprintf("%s:%d", first.Address, JoinPort), token: tok.Token, caHash: hash}, nil
}

// selfJoinArgs are the kernel arguments of a node that joins by itself (selfJoin).
func selfJoinArgs(ctx context.Context, first NodeState, n Node, cctx *client.Context, ttl time.Duration) ([]string, error) {
	j, err := selfJoin(ctx, first, n, cctx, ttl)
	if err != nil {
		return nil, err
	}
	return []string{"cairn.hostname=" + n.Name, "cairn.join=" + j.endpoint, "cairn.jointoken=" + j.token, "cairn.joinca=" + j.caHash}, nil
}
