package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// Guest ports forwarded for every node besides the machine API (and the launcher's network probe).
const (
	KubePort = 6443
	JoinPort = client.JoinPort
)

// Disk serials the generated configs select (config.DefaultDisk).
const (
	SerialState     = "cairn-state"
	SerialEphemeral = "cairn-ephemeral"
	SerialEtcd      = "cairn-etcd"
)

// VMSpec is everything needed to start one node's VM.
type VMSpec struct {
	Node   Node
	Dir    string
	Group  string // the cluster L2's multicast group; "" for none
	Mode   qemu.Mode
	Image  Artifacts
	Memory int
	CPUs   int
	Disks  []qemu.Disk
	Token  string
	// Cmdline are extra kernel arguments (a self-joining node's cairn.join=...).
	Cmdline []string
	// HostPorts keeps a restarted node's host ports (NodeState.Ports); nil picks free ones.
	HostPorts map[int]int
	// RTCBase starts the VM's clock at this time (qemu.Config.RTCBase); zero: now.
	RTCBase time.Time
	// TPM gives the VM an emulated TPM 2.0 (qemu.Config.TPM).
	TPM bool
	// L2ByPlatform: the node's L2 address comes from its platform's network config (a NoCloud seed's
	// network-config), not from ip= on its kernel command line.
	L2ByPlatform bool
}

// platformArg says where a local VM looks for user data: on its NoCloud seed when it has one, else
// nowhere. QEMU's user network would otherwise take a metadata service's address (169.254.169.254,
// metadata.google.internal) to the host's, and a cluster made on a cloud machine would read that
// machine's user data; a node with its own metadata service (metadataCommand) asks that one. An explicit cairn.platform= among the extra arguments wins.
func platformArg(disks []qemu.Disk, metadata bool, cmdline []string) string {
	for _, a := range cmdline {
		if strings.HasPrefix(a, "cairn.platform=") {
			return a
		}
	}
	if metadata {
		return "cairn.platform=" + UserDataEC2
	}
	for _, d := range disks {
		if d.Serial == seedSerial {
			return "cairn.platform=nocloud"
		}
	}
	return "cairn.platform=none"
}

// StartVM starts the node's QEMU detached from this process (it keeps running when cairnctl exits) and
// returns it with the node's recorded state.
func StartVM(ctx context.Context, s VMSpec) (*qemu.VM, NodeState, error) {
	md, err := metadataCommand(s.Dir)
	if err != nil {
		return nil, NodeState{}, fmt.Errorf("node %s: %w", s.Node.Name, err)
	}
	c := qemu.Config{
		Name: s.Node.Name, Dir: s.Dir, Memory: s.Memory, CPUs: s.CPUs, Nice: Nice(s.Node.Role), Mode: s.Mode,
		Cmdline: append([]string{"cairn.token=" + s.Token, platformArg(s.Disks, md != nil, s.Cmdline)}, s.Cmdline...),
		Ports:   []int{KubePort, JoinPort}, HostPorts: s.HostPorts, RTCBase: s.RTCBase, TPM: s.TPM,
		Disks: s.Disks, Metadata: md,
		Kernel: s.Image.Kernel, Initramfs: s.Image.Initramfs, Payload: s.Image.Payload, ISO: s.Image.ISO, Raw: s.Image.Raw,
	}
	if s.Group != "" {
		c.L2 = &qemu.L2{Group: s.Group, MAC: s.Node.MAC, Address: s.Node.Prefix()}
		if s.L2ByPlatform {
			c.L2.Address = ""
		}
	}
	vm, err := qemu.New(c)
	if err != nil {
		return nil, NodeState{}, fmt.Errorf("node %s: %w", s.Node.Name, err)
	}
	if err := vm.Start(ctx); err != nil {
		return nil, NodeState{}, fmt.Errorf("node %s: %w", s.Node.Name, err)
	}
	ns := NodeState{Node: s.Node, Memory: s.Memory, CPUs: s.CPUs, Token: s.Token, Ports: map[int]int{}}
	for _, g := range []int{qemu.APIPort, qemu.ProbePort, KubePort, JoinPort} {
		ns.Ports[g] = vm.HostPort(g)
	}
	return vm, ns, nil
}

// Boot is how a freshly started node came up.
type Boot struct {
	Fingerprint string
	Status      *machine.StatusResponse
	// Network and API are the times from QEMU's start to the guest's network answering and to the first
	// successful Status call.
	Network, API time.Duration
}

// WaitMaintenance waits for a new node's maintenance API: first the guest's network (the launcher's
// probe, which sends nothing to the API port), then the certificate fingerprint on its console, then
// Status with the token and the pinned fingerprint, one connection at a time.
func WaitMaintenance(ctx context.Context, vm *qemu.VM, endpoint, token string) (*Boot, error) {
	if err := vm.WaitNetwork(ctx); err != nil {
		return nil, fmt.Errorf("%w\nconsole %s ends with:\n%s", err, vm.ConsolePath(), ConsoleTail(vm.ConsolePath(), 2000))
	}
	b := &Boot{Network: time.Since(vm.Started())}
	fp, err := WaitFingerprint(ctx, vm.ConsolePath(), 0)
	if err != nil {
		return nil, fmt.Errorf("%w\nconsole ends with:\n%s", err, ConsoleTail(vm.ConsolePath(), 2000))
	}
	b.Fingerprint = fp
	// A Status call pinned to the fingerprint: also proves that the console told the truth.
	connect := Dialer(client.Options{Endpoint: endpoint, Token: token, Fingerprint: fp})
	anyState := func(*machine.StatusResponse) bool { return true }
	if b.Status, err = WaitStatus(ctx, connect, anyState); err != nil {
		return nil, fmt.Errorf("machine API at %s: %w\nconsole ends with:\n%s", endpoint, err, ConsoleTail(vm.ConsolePath(), 2000))
	}
	b.API = time.Since(vm.Started())
	return b, nil
}

// RandomToken is a bootstrap token for the kernel command line: 128 random bits in hex.
func RandomToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
