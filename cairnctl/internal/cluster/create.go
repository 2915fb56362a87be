package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// CreateOptions are the inputs of `cairnctl cluster create`.
type CreateOptions struct {
	Name          string
	Root          string // the clusters directory (~/.cairn/clusters)
	ImageDir      string
	Mode          qemu.Mode
	ControlPlanes int
	Workers       int
	// TPM gives every node an emulated TPM 2.0 (swtpm; q35 modes only).
	TPM bool
	// EncryptState makes every node's STATE LUKS2 with its key sealed to its TPM (needs TPM); each node's
	// recovery key is kept in its directory (RecoveryKeyFile).
	EncryptState bool
	// Memory is every node's memory in MiB; 0 gives control planes 2048 and workers 1024 (DESIGN §11:
	// a control plane's components need about 700 MB).
	Memory int
	CPUs   int
	// Disk sizes in bytes; 0 takes the defaults (1 GiB, 8 GiB, 2 GiB).
	StateSize, EphemeralSize, EtcdSize int64
	// DiskFiles attach existing images (serial → absolute path) to the first control plane: in place of
	// the blank disk of that serial, or as an extra disk for any other serial; destroy leaves them alone.
	DiskFiles map[string]string
	// NoInit boots the nodes and leaves them in maintenance mode.
	NoInit bool
	// UserData boots the (single) control plane with its config with `bootstrap: true` as user data,
	// on a NoCloud seed (UserDataNoCloud) or behind a metadata service (UserDataEC2): it inits itself,
	// as a cloud image does from its user data, and nobody sends it an Init. Nodes that join from user
	// data come with `cluster add --userdata`. "": no user data.
	UserData string
	// MergeInto, when set, is a cairnconfig file the cluster's context is merged into.
	MergeInto string
	// BootTimeout bounds each node's wait for its API; 0 means 5 minutes.
	BootTimeout time.Duration
	// SequenceTimeout bounds each node's Init or Join; 0 means 30 minutes (Kubernetes under TCG).
	SequenceTimeout time.Duration
	// FormatEvent renders a node's sequence event as a progress line.
	FormatEvent func(*machine.Event) string
	// KernelArgs are extra kernel command line arguments for every node (cairn.* settings).
	KernelArgs []string
	// VIP, when set, is the control planes' shared API address on the L2 (cluster.vip).
	VIP string
}

// Result is what create made.
type Result struct {
	Root        string
	Dir         string
	State       *State
	CairnConfig string
	Kubeconfig  string // "" when the node could not give one
	// Fingerprints are the maintenance certificates' of the nodes' first boot, by node name.
	Fingerprints map[string]string
}

// Create boots a local cluster. Each step prints a progress line. On failure after the VMs started,
// they are left running for inspection and the error says how to remove them.
func Create(ctx context.Context, o CreateOptions, p *Progress) (*Result, error) {
	o = o.withDefaults()
	if err := CheckName(o.Name); err != nil {
		return nil, err
	}
	if err := checkUserDataSource(o.UserData); err != nil {
		return nil, err
	}
	if o.EncryptState && !o.TPM {
		return nil, fmt.Errorf("--encrypt-state seals each node's STATE key to its TPM: add --tpm (and an iso, iso-uefi or raw --mode)")
	}
	if o.UserData != "" && (o.ControlPlanes != 1 || o.Workers != 0 || o.NoInit) {
		return nil, fmt.Errorf("--userdata makes one control plane that inits itself (not with --controlplanes, --workers or --no-init): " +
			"add the nodes that join from user data with `cairnctl cluster add --userdata`")
	}
	img, err := FindArtifacts(o.ImageDir, o.Mode)
	if err != nil {
		return nil, err
	}
	dir := Dir(o.Root, o.Name)
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("cluster %s already exists in %s: remove it first with `%s`", o.Name, dir, DestroyCommand(o.Root, o.Name))
	}
	existing, _, err := List(o.Root)
	if err != nil {
		return nil, err
	}
	var groups []string
	for _, s := range existing {
		groups = append(groups, s.Group)
	}
	layout, err := Plan(o.Name, o.ControlPlanes, o.Workers, groups)
	if err != nil {
		return nil, err
	}
	if o.VIP != "" {
		if err := layout.SetVIP(o.VIP); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(o.Root, 0o700); err != nil {
		return nil, fmt.Errorf("clusters directory %s: %w", o.Root, err)
	}
	// Mkdir, not MkdirAll: of two creates of the same name, one fails here.
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	// The hang watchers (hang.go) end every wait of create when a node's kernel hangs.
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res, err := create(hctx, cancel, o, layout, img, dir, p)
	if err = withHang(hctx, err); err != nil {
		return res, fmt.Errorf("%w\n(the cluster's VMs, if any, keep running for inspection: console logs are in %s; remove everything with `%s`)",
			err, filepath.Join(dir, nodesDir), DestroyCommand(o.Root, o.Name))
	}
	return res, nil
}

func (o CreateOptions) withDefaults() CreateOptions {
	if o.Mode == "" {
		o.Mode = qemu.ModeVmlinux
	}
	if o.StateSize == 0 {
		o.StateSize = 1 << 30
	}
	if o.EphemeralSize == 0 {
		o.EphemeralSize = 8 << 30
	}
	if o.EtcdSize == 0 {
		o.EtcdSize = 2 << 30
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 5 * time.Minute
	}
	if o.SequenceTimeout == 0 {
		o.SequenceTimeout = 30 * time.Minute
	}
	if o.FormatEvent == nil {
		o.FormatEvent = func(e *machine.Event) string {
			return fmt.Sprintf("%s %s %s %s", e.Sequence, e.Task, e.Outcome, e.Error)
		}
	}
	return o
}

// cpus is a node's vCPUs: --cpus, else DefaultCPUs for this host and the cluster's shape.
func (o CreateOptions) cpus(role string) int {
	if o.CPUs > 0 {
		return o.CPUs
	}
	cp, w := DefaultCPUs(runtime.NumCPU(), o.ControlPlanes, o.Workers)
	if role == RoleControlPlane {
		return cp
	}
	return w
}

// memory is a node's memory: the option, else the role's default.
func (o CreateOptions) memory(role string) int {
	switch {
	case o.Memory > 0:
		return o.Memory
	case role == RoleControlPlane:
		return 2048
	default:
		return 1024
	}
}

// disks are a node's disks: STATE and EPHEMERAL, and ETCD on control planes, selected by serial.
func (o CreateOptions) disks(n Node, first bool) []qemu.Disk {
	d := []qemu.Disk{{Serial: SerialState, Size: o.StateSize}, {Serial: SerialEphemeral, Size: o.EphemeralSize}}
	if n.Role == RoleControlPlane {
		d = append(d, qemu.Disk{Serial: SerialEtcd, Size: o.EtcdSize})
	}
	if !first {
		return d
	}
	for i := range d {
		d[i].File = o.DiskFiles[d[i].Serial]
	}
	// Other serials are extra disks: a foreign disk the node must leave alone, for one.
	var extra []string
	for serial := range o.DiskFiles {
		if !slices.ContainsFunc(d, func(x qemu.Disk) bool { return x.Serial == serial }) {
			extra = append(extra, serial)
		}
	}
	slices.Sort(extra)
	for _, serial := range extra {
		d = append(d, qemu.Disk{Serial: serial, File: o.DiskFiles[serial]})
	}
	return d
}

// printStarted is the progress line of a node whose QEMU started.
func printStarted(p *Progress, spec VMSpec, ns NodeState, vm *qemu.VM) {
	nice := ""
	if n := Nice(ns.Role); n != 0 {
		nice = fmt.Sprintf(" at nice %d", n)
	}
	p.Printf("%s: started QEMU (%s, %s mode, %d MiB, %d CPUs%s; machine API on %s, console %s)",
		ns.Name, ns.Address, spec.Mode, spec.Memory, spec.CPUs, nice, ns.APIEndpoint(), vm.ConsolePath())
}

func create(ctx context.Context, hung context.CancelCauseFunc, o CreateOptions, layout Layout, img Artifacts, dir string, p *Progress) (*Result, error) {
	now := time.Now()
	res := &Result{Root: o.Root, Dir: dir, Fingerprints: map[string]string{}}
	cfgs, err := GenerateConfigs(o.Name, layout, now, o.EncryptState)
	if err != nil {
		return res, err
	}
	if err := writeConfigs(dir, cfgs, layout); err != nil {
		return res, err
	}
	p.Printf("wrote the configs of cluster %s (endpoint %s) in %s", o.Name, layout.Endpoint(), dir)

	st := &State{Name: o.Name, Created: now, Mode: o.Mode, Group: layout.Group, VIP: layout.VIP, TPM: o.TPM}
	res.State = st
	vms := map[string]*qemu.VM{}
	for i, n := range layout.Nodes {
		spec := VMSpec{Node: n, Dir: NodeDir(dir, n.Name), Group: layout.Group, Mode: o.Mode, Image: img,
			Memory: o.memory(n.Role), CPUs: o.cpus(n.Role), Disks: o.disks(n, i == 0), Token: RandomToken(), Cmdline: o.KernelArgs, TPM: o.TPM}
		if o.UserData != "" {
			ud, err := initUserData(spec.Dir, n)
			if err != nil {
				return res, err
			}
			where, err := giveUserData(ctx, o.UserData, &spec, ud)
			if err != nil {
				return res, err
			}
			p.Printf("%s: its user data (its config with bootstrap: true) is %s", n.Name, where)
		}
		vm, ns, err := StartVM(ctx, spec)
		if err != nil {
			return res, err
		}
		vms[n.Name] = vm
		go newHangWatch(n.Name, vm, o.Mode).run(ctx, hung)
		st.Nodes = append(st.Nodes, ns)
		// Saved after every start, so destroy finds each VM even if this process dies now.
		if err := st.Save(dir); err != nil {
			return res, err
		}
		printStarted(p, spec, ns, vm)
	}

	var endpoints []string
	for _, n := range st.Nodes {
		endpoints = append(endpoints, n.APIEndpoint())
	}
	cctx, err := ClientContext(cfgs.Secrets, endpoints, now)
	if err != nil {
		return res, err
	}
	res.CairnConfig = filepath.Join(dir, CairnConfigFile)
	cc := &client.Config{}
	cc.Merge(o.Name, cctx)
	if err := cc.Save(res.CairnConfig); err != nil {
		return res, fmt.Errorf("write %s: %w", res.CairnConfig, err)
	}
	p.Printf("wrote %s (context %s, %d endpoints, admin certificate)", res.CairnConfig, o.Name, len(endpoints))
	if o.MergeInto != "" {
		if err := mergeContext(o.MergeInto, o.Name, cctx); err != nil {
			return res, err
		}
		p.Printf("merged context %s into %s", o.Name, o.MergeInto)
	}

	if o.UserData != "" {
		first := st.Nodes[0]
		p.Printf("%s: inits by itself from its user data; waiting until it is Running", first.Name)
		if err := waitRunning(ctx, first, cctx, o.BootTimeout+o.SequenceTimeout, p); err != nil {
			return res, fmt.Errorf("%w (its maintenance API says why: cairnctl --nodes %s --token %s --insecure status)%s",
				err, first.APIEndpoint(), first.Token, vmExit(vms[first.Name]))
		}
		return res, writeFirstKubeconfig(ctx, res, dir, first, cctx, p)
	}
	for _, n := range st.Nodes {
		bctx, cancel := context.WithTimeout(ctx, o.BootTimeout)
		b, err := WaitMaintenance(bctx, vms[n.Name], n.APIEndpoint(), n.Token)
		cancel()
		if err != nil {
			return res, fmt.Errorf("node %s: %w", n.Name, err)
		}
		res.Fingerprints[n.Name] = b.Fingerprint
		p.Printf("%s: machine API answers: state %s (network after %.1fs, API after %.1fs from QEMU's start)",
			n.Name, b.Status.State, b.Network.Seconds(), b.API.Seconds())
		if b.Status.State != "Boot" {
			return res, fmt.Errorf("node %s is in %s, not Boot: its disks are not blank", n.Name, b.Status.State)
		}
	}
	if o.NoInit {
		return res, nil
	}

	first := st.Nodes[0]
	p.Printf("%s: init (the first control plane)", first.Name)
	nodeCfg := func(n NodeState) ([]byte, error) {
		return os.ReadFile(filepath.Join(NodeDir(dir, n.Name), NodeConfigFile))
	}
	data, err := nodeCfg(first)
	if err != nil {
		return res, err
	}
	// streamed records that a sequence's stream delivered an event: the node took its lock, so the
	// sequence runs whether or not the stream survives.
	streamed := map[string]bool{}
	printEvent := func(node string) func(*machine.Event) {
		return func(e *machine.Event) {
			streamed[node] = true
			p.Printf("%s: %s", node, o.FormatEvent(e))
		}
	}
	maint := client.Options{Endpoint: first.APIEndpoint(), Token: first.Token, Fingerprint: res.Fingerprints[first.Name]}
	recovery, err := StateRecoveryKey(data)
	if err != nil {
		return res, err
	}
	ictx, cancel := context.WithTimeout(ctx, o.SequenceTimeout)
	err = initNode(ictx, maint, data, recovery, printEvent(first.Name))
	cancel()
	if status.Code(err) == codes.Unavailable && streamed[first.Name] && vmAlive(vms[first.Name]) {
		// The stream broke but the node lives: Init goes on without a listener. Follow it over mutual
		// TLS (the lock switched the API) instead of failing a cluster that is still coming up.
		p.Printf("%s: lost the Init stream (%s); following the node's state over mutual TLS", first.Name, status.Convert(err).Message())
		err = nil
	}
	if err != nil {
		return res, fmt.Errorf("node %s: init: %w%s", first.Name, err, vmExit(vms[first.Name]))
	}
	if err := saveRecoveryKey(dir, first.Name, recovery, p); err != nil {
		return res, err
	}
	if err := waitRunning(ctx, first, cctx, o.SequenceTimeout, p); err != nil {
		return res, fmt.Errorf("%w%s", err, vmExit(vms[first.Name]))
	}
	if err := writeFirstKubeconfig(ctx, res, dir, first, cctx, p); err != nil {
		return res, err
	}

	if len(st.Nodes) > 1 {
		waitSettled(ctx, first, cctx, p)
	}
	for _, n := range st.Nodes[1:] {
		if err := pushJoin(ctx, dir, first, n, res.Fingerprints[n.Name], vms[n.Name], cctx, o.SequenceTimeout, o.FormatEvent, p); err != nil {
			return res, err
		}
	}
	return res, nil
}

// pushJoin joins node n through the first control plane as `cairnctl join` does (a ticket asked for on
// the operator's side and sent with the node's config to its maintenance API), printing the node's
// events, then waits until it is Running.
func pushJoin(ctx context.Context, dir string, first, n NodeState, fingerprint string, vm *qemu.VM, cctx *client.Context,
	timeout time.Duration, format func(*machine.Event) string, p *Progress) error {
	p.Printf("%s: join as a %s through %s", n.Name, n.Role, first.Name)
	data, err := os.ReadFile(filepath.Join(NodeDir(dir, n.Name), NodeConfigFile))
	if err != nil {
		return err
	}
	recovery, err := StateRecoveryKey(data)
	if err != nil {
		return err
	}
	t := JoinTarget{
		Node:         client.Options{Endpoint: n.APIEndpoint(), Token: n.Token, Fingerprint: fingerprint},
		ControlPlane: first.APIEndpoint(),
		JoinService:  fmt.Sprintf("127.0.0.1:%d", first.Ports[JoinPort]),
		Context:      cctx,
		RecoveryKey:  recovery,
		Retrying:     func(notice string) { p.Printf("%s: %s", n.Name, notice) },
	}
	streamed := false
	jctx, cancel := context.WithTimeout(ctx, timeout)
	err = JoinNode(jctx, t, data, false, func(e *machine.Event) {
		streamed = true
		p.Printf("%s: %s", n.Name, format(e))
	})
	cancel()
	if status.Code(err) == codes.Unavailable && streamed && vmAlive(vm) {
		p.Printf("%s: lost the Join stream (%s); following the node's state over mutual TLS", n.Name, status.Convert(err).Message())
		err = nil
	}
	if err != nil {
		return fmt.Errorf("node %s: join: %w%s", n.Name, err, vmExit(vm))
	}
	if err := saveRecoveryKey(dir, n.Name, recovery, p); err != nil {
		return err
	}
	if err := waitRunning(ctx, n, cctx, timeout, p); err != nil {
		return fmt.Errorf("%w%s", err, vmExit(vm))
	}
	return nil
}

// writeConfigs writes secrets.yaml, controlplane.yaml, worker.yaml and each node's config.yaml.
func writeConfigs(dir string, c *Configs, l Layout) error {
	files := []struct {
		path string
		v    any
	}{
		{filepath.Join(dir, SecretsFile), c.Secrets},
		{filepath.Join(dir, ControlPlaneCfg), c.ControlPlane},
		{filepath.Join(dir, WorkerCfg), c.Worker},
	}
	for _, n := range l.Nodes {
		nd := NodeDir(dir, n.Name)
		if err := os.MkdirAll(nd, 0o700); err != nil {
			return err
		}
		files = append(files, struct {
			path string
			v    any
		}{filepath.Join(nd, NodeConfigFile), c.Nodes[n.Name]})
	}
	for _, f := range files {
		if err := writePrivateYAML(f.path, f.v); err != nil {
			return err
		}
	}
	return nil
}

// writePrivateYAML writes a config document readable by its owner alone: control-plane configs and
// secrets.yaml hold the cluster's private keys.
func writePrivateYAML(path string, v any) error {
	data, err := config.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, data, 0o600)
}

// mergeContext adds the cluster's context to a cairnconfig file, creating it if needed.
func mergeContext(path, name string, ctx *client.Context) error {
	cc, err := client.LoadConfig(path)
	if errors.Is(err, os.ErrNotExist) {
		cc, err = &client.Config{}, nil
	}
	if err != nil {
		return err
	}
	cc.Merge(name, ctx)
	if err := cc.Save(path); err != nil {
		return fmt.Errorf("merge into %s: %w", path, err)
	}
	return nil
}

// initNode sends Init over the maintenance API and follows its events to the end.
func initNode(ctx context.Context, o client.Options, cfg []byte, recovery string, event func(*machine.Event)) error {
	mc, conn, err := client.Connect(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	s, err := mc.Init(ctx, &machine.InitRequest{Config: cfg, StateRecoveryKey: recovery})
	if err != nil {
		return err
	}
	for {
		e, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		event(e)
	}
}

// waitRunning waits, over mutual TLS, for a node whose Init or Join was sent to report Running. A
// sequence that failed leaves the node out of Init/Join with its error in Status: that ends the wait.
func waitRunning(ctx context.Context, n NodeState, cctx *client.Context, timeout time.Duration, p *Progress) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	settled := func(s *machine.StatusResponse) bool {
		return s.State == "Running" || (s.State != "Init" && s.State != "Join" && s.LastError != "")
	}
	s, err := WaitStatus(wctx, Dialer(client.Options{Endpoint: n.APIEndpoint(), Context: cctx}), settled)
	if err != nil {
		return fmt.Errorf("node %s: waiting for Running over mutual TLS: %w", n.Name, err)
	}
	if s.State != "Running" {
		return fmt.Errorf("node %s: %s, not Running: %s", n.Name, s.State, s.LastError)
	}
	p.Printf("%s: %s (%s, api %s)", n.Name, s.State, s.MachineType, s.ApiMode)
	return nil
}

// vmAlive reports whether the node's QEMU still runs.
func vmAlive(vm *qemu.VM) bool {
	select {
	case <-vm.Exited():
		return false
	default:
		return true
	}
}

// vmExit explains an error by the VM's end, if it ended: often the real cause (out of memory, killed).
func vmExit(vm *qemu.VM) string {
	if vmAlive(vm) {
		return ""
	}
	if err := vm.Wait(); err != nil {
		return "\n(" + err.Error() + ")"
	}
	return "\n(QEMU exited)"
}

// DestroyCommand is the command that removes the cluster, with --state-dir when root is not the default.
func DestroyCommand(root, name string) string {
	c := "cairnctl cluster destroy --name " + name
	if def, err := DefaultRoot(); err != nil || def != root {
		c += " --state-dir " + root
	}
	return c
}

// Instructions tell the user how to reach the cluster.
func (r *Result) Instructions(w io.Writer, noInit bool) {
	name := r.State.Name
	if noInit {
		fmt.Fprintf(w, "\nThe nodes of cluster %s wait in maintenance mode. Reach each with its bootstrap token:\n", name)
		for _, n := range r.State.Nodes {
			fmt.Fprintf(w, "  cairnctl --nodes %s --token %s --fingerprint %s status    # %s, %s\n",
				n.APIEndpoint(), n.Token, r.Fingerprints[n.Name], n.Name, n.Role)
		}
		fmt.Fprintf(w, "Configs: %s and each node's %s under %s\n",
			filepath.Join(r.Dir, ControlPlaneCfg), NodeConfigFile, filepath.Join(r.Dir, nodesDir))
	} else {
		fmt.Fprintf(w, "\nCluster %s is up:\n", name)
	}
	fmt.Fprintf(w, "  export CAIRNCONFIG=%s\n  cairnctl status\n", r.CairnConfig)
	if r.Kubeconfig != "" {
		fmt.Fprintf(w, "  kubectl --kubeconfig %s get nodes\n", r.Kubeconfig)
	}
	fmt.Fprintf(w, "Remove it with:\n  %s\n", DestroyCommand(r.Root, name))
}
