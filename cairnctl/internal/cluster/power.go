package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// Power of a local cluster's VMs, as a machine room has it: `cluster stop` pulls the plug (QEMU is
// killed, the node is told nothing, as in a power cut), `cluster start` powers the machine on again with
// its disks, its address and its host ports, so the cluster's client configs still reach it; the node
// then boots to where its lock says. A graceful stop is `cairnctl shutdown`.

// PowerOptions select a cluster's nodes to power on or off.
type PowerOptions struct {
	Name, Root string
	Nodes      []string // node names; empty: every node
	ImageDir   string   // start: the image to boot (the cluster's mode)
	// ClockOffset (start) sets the VMs' clocks this far ahead of the host's: a node powered on months
	// later, as certificate renewal needs to be shown.
	ClockOffset time.Duration
	// BootTimeout (start) bounds the wait for each node's machine API; 0 means 5 minutes.
	BootTimeout time.Duration
}

// selected is the cluster's state and the nodes o names, checked.
func (o PowerOptions) selected() (*State, []NodeState, error) {
	if err := CheckName(o.Name); err != nil {
		return nil, nil, err
	}
	st, err := Load(Dir(o.Root, o.Name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("no cluster %s in %s (see `cairnctl cluster list`)", o.Name, o.Root)
	}
	if err != nil {
		return nil, nil, err
	}
	var out []NodeState
	for _, want := range o.Nodes {
		i := slices.IndexFunc(st.Nodes, func(n NodeState) bool { return n.Name == want })
		if i < 0 {
			var names []string
			for _, n := range st.Nodes {
				names = append(names, n.Name)
			}
			return nil, nil, fmt.Errorf("cluster %s has no node %s (it has %s)", o.Name, want, strings.Join(names, ", "))
		}
		out = append(out, st.Nodes[i])
	}
	if len(o.Nodes) == 0 {
		out = st.Nodes
	}
	return st, out, nil
}

// PowerOff kills the selected nodes' QEMU: a power cut.
func PowerOff(ctx context.Context, o PowerOptions, p *Progress) error {
	_, nodes, err := o.selected()
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range nodes {
		nd := NodeDir(Dir(o.Root, o.Name), n.Name)
		pid, running := qemu.Running(nd)
		if !running {
			p.Printf("%s: already off", n.Name)
			continue
		}
		if err := qemu.Kill(nd); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			continue
		}
		if err := waitGone(ctx, nd); err != nil {
			errs = append(errs, fmt.Errorf("node %s (pid %d): %w", n.Name, pid, err))
			continue
		}
		p.Printf("%s: powered off (QEMU pid %d killed; the node was not told)", n.Name, pid)
	}
	return errors.Join(errs...)
}

// PowerOn starts the selected nodes' VMs again and waits for each machine API to answer.
func PowerOn(ctx context.Context, o PowerOptions, p *Progress) error {
	st, nodes, err := o.selected()
	if err != nil {
		return err
	}
	img, err := FindArtifacts(o.ImageDir, st.Mode)
	if err != nil {
		return err
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 5 * time.Minute
	}
	dir := Dir(o.Root, o.Name)
	var rtc time.Time
	if o.ClockOffset != 0 {
		rtc = time.Now().Add(o.ClockOffset)
	}
	for _, n := range nodes {
		nd := NodeDir(dir, n.Name)
		if _, running := qemu.Running(nd); running {
			p.Printf("%s: already on", n.Name)
			continue
		}
		disks, err := nodeDisks(nd)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		spec := VMSpec{Node: n.Node, Dir: nd, Group: st.Group, Mode: st.Mode, Image: img, Memory: n.Memory, CPUs: n.CPUs,
			Disks: disks, Token: n.Token, HostPorts: n.Ports, RTCBase: rtc, TPM: st.TPM}
		vm, ns, err := StartVM(ctx, spec)
		if err != nil {
			return err
		}
		printStarted(p, spec, ns, vm)
		if !rtc.IsZero() {
			p.Printf("%s: its clock starts at %s (%s ahead of this host's)", n.Name, rtc.UTC().Format(time.RFC3339), o.ClockOffset)
		}
		bctx, cancel := context.WithTimeout(ctx, o.BootTimeout)
		err = waitAPI(bctx, vm, ns)
		cancel()
		if err != nil {
			return fmt.Errorf("node %s: %w%s\nconsole %s ends with:\n%s", n.Name, err, vmExit(vm), vm.ConsolePath(), ConsoleTail(vm.ConsolePath(), 2000))
		}
		p.Printf("%s: machine API answers on %s (after %.1fs)", n.Name, ns.APIEndpoint(), time.Since(vm.Started()).Seconds())
	}
	return nil
}

// waitAPI waits for the guest's network and then for its machine API to accept a TLS connection, in
// whichever mode it boots (a configured node wants mutual TLS, a fresh one its token).
func waitAPI(ctx context.Context, vm *qemu.VM, ns NodeState) error {
	if err := vm.WaitNetwork(ctx); err != nil {
		return err
	}
	_, err := WaitFingerprint(ctx, vm.ConsolePath(), 0)
	return err
}

// nodeDisks are the disks a node was created with: the blank disks cluster create made in its
// directory, STATE, EPHEMERAL and ETCD first, in that order.
func nodeDisks(nodeDir string) ([]qemu.Disk, error) {
	files, err := filepath.Glob(filepath.Join(nodeDir, "disk-*.raw"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no disks in %s", nodeDir)
	}
	order := map[string]int{SerialState: 0, SerialEphemeral: 1, SerialEtcd: 2}
	var d []qemu.Disk
	for _, f := range files {
		serial := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "disk-"), ".raw")
		d = append(d, qemu.Disk{Serial: serial, File: f})
	}
	sort.SliceStable(d, func(i, j int) bool {
		oi, iok := order[d[i].Serial]
		oj, jok := order[d[j].Serial]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return d[i].Serial < d[j].Serial
	})
	return d, nil
}
