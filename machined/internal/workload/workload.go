// Package workload brings up Kubernetes on a configured node: it writes the PKI and configs the kube
// package renders, mounts the payload, runs containerd and the kubelet as supervised services,
// registers the payload's images,
// writes the static pods (etcd only once its disk is mounted), publishes the bootstrap objects, writes the
// pod network for the node's PodCIDR, and waits for etcd, the API server and the node to be Ready, each
// step a task of the node's sequence.
package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/cgroups"
	"github.com/cairn-os/cairn/machined/internal/containerd"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/kubeapi"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/proc"
	"github.com/cairn-os/cairn/machined/internal/sequence"
	"github.com/cairn-os/cairn/machined/internal/supervisor"
	"github.com/cairn-os/cairn/machined/internal/vip"
)

// Payload is where the node's runtime and images are, in api/payload's layout: the payload image
// mounted on a node, the payload directory in sandbox mode.
type Payload struct {
	Dir string
	// Mount checks the payload image against the SHA-256 the root image records and mounts it on Dir.
	// nil when Dir is a plain directory (sandbox mode). It runs at Init, Join and every later boot,
	// never in maintenance mode, which needs no payload.
	Mount func(ctx context.Context) error
	// Release undoes Mount when the payload lies on a volume (the ISO's stream, unpacked onto EPHEMERAL),
	// so that the volume unmounts before a reboot or a wipe; it does nothing for a payload on its own
	// medium. nil in sandbox mode.
	Release func(ctx context.Context) error
	// Unpacked is the file on EPHEMERAL the payload is mounted from, "" when it is mounted from its medium
	// (or not yet mounted); nil in sandbox mode. An install copies it.
	Unpacked func() string
}

// Bin holds containerd, its shim and runc; CNI the CNI plugins.
func (p Payload) Bin() string { return filepath.Join(p.Dir, payload.BinDir) }
func (p Payload) CNI() string { return filepath.Join(p.Dir, payload.CNIDir) }

// BindShared makes a directory a shared mount point (bind it onto itself, make it rshared), so mounts the
// kubelet makes under it reach containerd and back.
type BindShared func(dir string) error

// Workload is the Kubernetes side of a node.
type Workload struct {
	Paths      paths.Paths
	Sandbox    bool
	Payload    Payload
	Services   *supervisor.Supervisor
	Starter    proc.Starter
	Log        *slog.Logger
	BindShared BindShared
	// Identity reports the node's name and addresses at the time a task runs.
	Identity func() (string, []netip.Addr)
	// Ready is closed once the kernel modules the workload needs are loaded (nil: no wait).
	Ready <-chan struct{}
	// Now is the clock for certificates.
	Now func() time.Time
	// Ticket returns a joined node's join ticket.
	Ticket func() (*machine.JoinTicket, error)
	// StartJoinService starts the join service on a control plane (idempotent).
	StartJoinService func() error
	// Hosts publishes discovery names into /etc/hosts (nil: not this node's job, e.g. sandbox mode).
	Hosts func(map[string][]netip.Addr)
	// NamesEvent reports that the discovery names changed, with what they are now (nil: no events).
	NamesEvent func(message string)
	// StateDir is where STATE is now; an Init from an etcd snapshot finds the snapshot there, and
	// /etc/kubernetes lives there.
	StateDir func() string
	// Bind bind-mounts a directory (sys.Bind); nil in sandbox mode, where /etc is a plain directory.
	Bind func(src, dst string) error
	// EtcdVolume checks that etcd's data path is this cluster's etcd volume before etcd's manifest is
	// written (volumes.Manager.CheckEtcdVolume); nil: only that the directory exists.
	EtcdVolume func(ctx context.Context, c *config.MachineConfig) error
	// VIPLink puts cluster.vip on this node (netcfg.VIPLink); nil in sandbox mode, where a control plane
	// does not take part in the VIP's election (it would put the address on the host).
	VIPLink vip.Link
	// VIPEvent reports this node taking or giving up the VIP (an event on the node's bus).
	VIPEvent func(outcome, message string)

	mu sync.Mutex
	// names are the discovery names last published, to report only a change.
	names map[string][]netip.Addr
	// members are the control planes the names were last published from.
	members []*machine.Member
	// vipStop ends this node's part in the VIP's election, releasing the address; nil when not running.
	vipStop  func()
	client   *client.Client
	renderer *kube.Renderer
	shared   bool // the kubelet's directory is a shared mount point already (sandbox in-process reboots)
	// payloadMounted: the payload was checked and mounted this boot.
	payloadMounted bool
	cfg            *config.MachineConfig
	// kubeClients keeps the clients of the API server (admin, nodeClient) and of etcd's health check, one
	// kept-alive connection each.
	kubeClients kubeapi.Clients
}

// Timeouts under emulation: the API server takes minutes to start on an emulated CPU.
const (
	startTimeout = 15 * time.Minute
	waitTimeout  = 20 * time.Minute
)

// Hook returns the workload's tasks for a sequence (node.Hooks.Workload): a worker's, a control plane's
// that joins an existing cluster, or the first control plane's (Init, and every boot after a Join too).
func (w *Workload) Hook(c *config.MachineConfig, seq fsm.Sequence) []sequence.Task {
	t := func(name string, run func(context.Context) error) sequence.Task {
		return sequence.Task{Name: name, Timeout: startTimeout, Run: run}
	}
	wait := func(name string, run func(context.Context) error) sequence.Task {
		return sequence.Task{Name: name, Timeout: waitTimeout, Run: run}
	}
	prepare := []sequence.Task{
		t("kernel-modules", w.waitModules),
		t("render", func(context.Context) error { return w.render(c) }),
		t("kubernetes-dir", w.persistKubernetesDir),
		t("opt-dir", w.optDir),
	}
	runtime := []sequence.Task{t("payload", w.mountPayload), t("containerd", w.startContainerd), t("images", w.registerImages)}
	pki := sequence.Task{Name: "kubernetes-pki", Once: true, Run: w.writePKI}
	renew := t("certificates", w.renewCertificates)
	nodeReady := wait("node-ready", w.waitNodeReady)
	ready := []sequence.Task{wait("pod-network", w.podNetwork(false)), nodeReady}
	// The first control plane's Init gives its Node the PodCIDR itself (podcidr.go). Its API server's
	// OpenAPI cache is warmed once the node is Running and its add-ons are up (WhileRunning).
	cpReady := []sequence.Task{wait("pod-network", w.podNetwork(seq == fsm.SeqInit)), nodeReady}
	// Before the kubelet, which (on a worker) and whose host-network add-ons reach the API by the
	// discovery name; WhileRunning keeps the names current from then on.
	names := t("discovery-names", w.discoveryNames)
	// A control plane's etcd member is reached by its node name: its address is recorded once its
	// member is healthy, at every boot (members.go).
	etcdName := t("etcd-name", w.recordEtcdName)
	// Last: the join service (control planes) and the Node's labels and taints.
	serve := t("join-service", func(context.Context) error { return w.StartJoinService() })
	// One late answer of a busy API server does not end a join that has done all the rest (make e2e-ha:
	// a worker's read of its Node timed out through the VIP while the third control plane settled).
	labels := t("node-labels", func(ctx context.Context) error { return untilInvalid(ctx, retryEvery, w.publishNodeSpec) })

	switch {
	case c.Machine.Type == config.TypeWorker:
		return slices.Concat(prepare, []sequence.Task{t("worker-files", w.writeWorkerFiles)}, runtime,
			[]sequence.Task{names, t("kubelet", w.startKubelet)}, ready, []sequence.Task{labels})
	case seq == fsm.SeqJoin:
		// A joining control plane's etcd member starts first, as a learner of the existing cluster, and
		// must vote before the local API server, which talks to it alone, can start.
		return slices.Concat(prepare, []sequence.Task{pki, renew}, runtime, []sequence.Task{
			t("etcd-manifest", w.writeEtcd),
			names,
			t("kubelet", w.startKubelet),
			wait("etcd-promote", w.promoteEtcd),
			wait("etcd-healthy", w.waitEtcd),
			etcdName,
			t("control-plane-manifests", w.writeControlPlane),
			wait("apiserver-ready", w.waitAPIServer),
			t("vip", w.startVIP),
			t("controller-manifests", w.writeControllers),
			t("addons", w.applyAddons),
		}, cpReady, []sequence.Task{serve, labels})
	default:
		return slices.Concat(prepare, []sequence.Task{pki, renew}, runtime, []sequence.Task{
			t("control-plane-manifests", w.writeControlPlane),
			{Name: "etcd-restore", Once: true, Timeout: startTimeout, Run: w.restoreEtcd},
			t("etcd-manifest", w.writeEtcd),
			names,
			t("kubelet", w.startKubelet),
			wait("etcd-healthy", w.waitEtcd),
			etcdName,
			wait("apiserver-ready", w.waitAPIServer),
			t("vip", w.startVIP),
			t("controller-manifests", w.writeControllers),
			t("bootstrap-objects", w.publishBootstrap),
			t("addons", w.applyAddons),
		}, cpReady, []sequence.Task{serve, labels})
	}
}

// StopTasks stop the kubelet, the pods and containerd before a reboot or shutdown, then release the
// payload if it lies on a volume, so the volumes unmount cleanly.
func (w *Workload) StopTasks() []sequence.Task {
	return []sequence.Task{{Name: "stop-kubernetes", Timeout: 2 * time.Minute, Run: func(ctx context.Context) error {
		w.stopVIP()
		if err := w.Services.Stop(ctx, "kubelet"); err != nil && !isUnknown(err) {
			return err
		}
		w.killPods(ctx)
		if err := w.Services.Stop(ctx, "containerd"); err != nil && !isUnknown(err) {
			return err
		}
		w.mu.Lock()
		if w.client != nil {
			w.client.Close()
			w.client = nil
		}
		w.mu.Unlock()
		return nil
	}}, {Name: "release-payload", Run: func(ctx context.Context) error {
		if w.Payload.Release == nil {
			return nil
		}
		return w.Payload.Release(ctx)
	}}}
}

func (w *Workload) waitModules(ctx context.Context) error {
	if w.Ready == nil {
		return nil
	}
	select {
	case <-w.Ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Workload) render(c *config.MachineConfig) error {
	name, ips := w.Identity()
	r, err := kube.New(c, kube.Node{Name: name, IPs: ips, DiscoveryNames: w.Hosts != nil}, w.Paths, kube.DefaultImages())
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.renderer, w.cfg = r, c
	w.mu.Unlock()
	return nil
}

func (w *Workload) config() *config.MachineConfig {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cfg
}

func (w *Workload) ticket() (*machine.JoinTicket, error) {
	if w.Ticket == nil {
		return nil, errors.New("no join ticket")
	}
	return w.Ticket()
}

// writeWorkerFiles writes what a worker's kubelet needs to bootstrap: the cluster CA and the bootstrap
// kubeconfig with the token, both from the join ticket.
func (w *Workload) writeWorkerFiles(context.Context) error {
	t, err := w.ticket()
	if err != nil {
		return err
	}
	files, err := w.Renderer().WorkerFiles(t.KubernetesCa, t.BootstrapToken)
	if err != nil {
		return err
	}
	return kube.WriteFiles(files)
}

// Renderer is the node's renderer once the workload has started (nil before).
func (w *Workload) Renderer() *kube.Renderer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.renderer
}

// persistKubernetesDir puts /etc/kubernetes (the PKI, kubeconfigs, static pods, a worker's kubelet
// credential) on STATE: /etc is RAM on a node, and a reboot must find the same certificates.
func (w *Workload) persistKubernetesDir(context.Context) error {
	if w.Bind == nil || w.StateDir == nil {
		return nil
	}
	return bindDir(w.Bind, filepath.Join(w.StateDir(), "kubernetes"), w.Renderer().Layout().Kubernetes())
}

// bindDir makes src and dst (a no-op for a mount point already in the read-only root) and binds src onto dst.
func bindDir(bind func(src, dst string) error, src, dst string) error {
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return bind(src, dst)
}

// writePKI writes the cluster PKI and the components' kubeconfigs once: the leaf certificates are made on
// this node, and making them again on every boot would change them under running clients.
func (w *Workload) writePKI(context.Context) error {
	r := w.Renderer()
	files, err := r.PKI(w.Now())
	if err != nil {
		return err
	}
	kcs, err := r.Kubeconfigs(w.Now())
	if err != nil {
		return err
	}
	return kube.WriteFiles(append(files, kcs...))
}

func (w *Workload) startContainerd(ctx context.Context) error {
	r := w.Renderer()
	l := r.Layout()
	group, shims := w.runtimeCgroups()
	opts := kube.ContainerdOptions{RestrictOOMScoreAdj: w.Sandbox, CNIBinDir: w.Payload.CNI(), ShimCgroup: shims}
	cfg, err := r.ContainerdConfig(opts)
	if err != nil {
		return err
	}
	if err := kube.WriteFiles(kube.Files{cfg}); err != nil {
		return err
	}
	if err := w.writeRegistries(); err != nil {
		return err
	}
	for _, d := range []string{l.ContainerdRoot(), l.ContainerdState(), l.CNIConfDir(), l.Log()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	w.Services.Start(supervisor.Service{
		Name: "containerd",
		Runner: &supervisor.Process{
			Path: filepath.Join(w.Payload.Bin(), "containerd"),
			Args: []string{"--config", l.ContainerdConfig()},
			// containerd finds its shim on PATH, and the shim runc.
			Env:     []string{"PATH=" + w.Payload.Bin() + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"},
			Starter: w.Starter,
			Cgroup:  group,
		},
		Health: func(ctx context.Context) error {
			c := w.containerdClient()
			if c == nil {
				return fmt.Errorf("not connected")
			}
			ok, err := c.IsServing(ctx)
			if err == nil && !ok {
				err = fmt.Errorf("not serving")
			}
			return err
		},
	})
	cli, err := containerd.Connect(ctx, l.ContainerdSocket())
	if err != nil {
		return err
	}
	w.mu.Lock()
	if w.client != nil {
		w.client.Close()
	}
	w.client = cli
	w.mu.Unlock()
	return nil
}

// runtimeCgroups makes the runtime's cgroups (see package cgroups) and returns containerd's directory
// and the shims' group (below the cgroup root, as runc's ShimCgroup option takes it); "" for both in
// sandbox mode, where the cgroups are the host's, and when the kernel cannot give them: containerd and
// its shims then run in machined's cgroup, and the node says so in its log.
func (w *Workload) runtimeCgroups() (containerd, shims string) {
	if w.Sandbox {
		return "", ""
	}
	h := w.cgroupHierarchy()
	_, err := h.Make(cgroups.Runtime())
	if err == nil {
		containerd, err = h.Make(cgroups.Containerd())
	}
	if err == nil {
		if _, err = h.Make(cgroups.Shims()); err == nil {
			shims = "/" + cgroups.Shims().Path
		}
	}
	if err != nil {
		w.Log.Warn("containerd runs without the runtime's cgroups: the pods may lose CPU time to it", "err", err)
		return "", ""
	}
	return containerd, shims
}

// cgroupHierarchy is the node's cgroup v2 hierarchy, where the runtime's groups are made and reweighed.
func (w *Workload) cgroupHierarchy() cgroups.Hierarchy {
	return cgroups.Hierarchy{Root: w.Paths.Join("sys", "fs", "cgroup")}
}

func (w *Workload) containerdClient() *client.Client {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.client
}

func isUnknown(err error) bool { return errors.Is(err, supervisor.ErrUnknown) }
