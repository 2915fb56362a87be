// Package volumes puts the disk library to work in the node's sequences: it finds STATE at boot, plans
// and mounts STATE, EPHEMERAL and ETCD in Init and Join, mounts them without formatting on the Running
// path, unmounts them before a reboot, and answers the Plan, Disks and Mounts RPCs.
//
// In sandbox mode without --host-disks every volume is a plain directory under the sandbox root: no
// block device on the host is ever opened for writing.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/cairn-os/cairn/machined/internal/sequence"
)

// Mounter mounts and unmounts (machined/internal/sys).
type Mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
	Unmount(target string, detach bool) error
}

// Manager owns the node's volumes.
type Manager struct {
	Paths paths.Paths
	// Devices is true when volumes live on block devices (a real node, or sandbox mode with --host-disks).
	Devices bool
	Scanner inventory.Scanner
	Mounter Mounter
	Runner  apply.Runner
	Log     *slog.Logger
	// MountInfo is the mount table to read ("" means the calling thread's).
	MountInfo string
	// Reread makes the kernel re-read a disk's partition table (sys.RereadPartitions).
	Reread func(path string) error
	// DisksReady returns once the driver of every disk controller is loaded, so a scan sees every disk
	// (nil: nothing to wait for). A STATE disk missed at boot would make a configured node look fresh.
	DisksReady func(ctx context.Context) error
	// Filesystems returns once the filesystem modules are loaded, before anything is mounted (nil:
	// nothing to load). A fresh node needs none to know it is fresh, so they are not loaded before that.
	Filesystems func(ctx context.Context) error
	// Crypt makes and opens an encrypted STATE (nil: none can be, as in sandbox mode); HasTPM says whether
	// the machine has the TPM its key would be sealed to.
	Crypt  apply.Crypter
	HasTPM func() bool

	mu        sync.Mutex
	recovery  string
	encrypted bool // STATE was opened as an encrypted volume
}

// StateEncrypted says STATE is an encrypted volume, opened with the TPM's key.
func (m *Manager) StateEncrypted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.encrypted
}

func (m *Manager) stateOpened(r apply.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.encrypted = r.Encrypted
}

// SetRecoveryKey is the recovery key of the STATE the next Init or Join encrypts ("" for none). It is
// kept in memory only, until the next call.
func (m *Manager) SetRecoveryKey(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recovery = key
}

// Directory is the plan action of a sandbox volume kept in a plain directory.
const Directory plan.Action = "directory"

// PlanError is a plan with refusals; Init and Join do not start (the API's FailedPrecondition).
type PlanError struct{ Plan plan.Plan }

func (e *PlanError) Error() string {
	return "the disk plan refuses, so nothing was formatted and the node stays in Boot:\n" + e.Plan.Err().Error()
}

// Plan says what Init or Join would do to which disk, without touching anything.
func (m *Manager) Plan(ctx context.Context, c *config.MachineConfig) (plan.Plan, error) {
	if !m.Devices {
		return m.directoryPlan(c), nil
	}
	disks, err := m.scan(ctx)
	if err != nil {
		return plan.Plan{}, err
	}
	hasTPM := m.Crypt != nil && m.HasTPM != nil && m.HasTPM()
	return plan.Make(plan.Input{Disks: disks, Config: c.Machine.Disks, MachineType: c.Machine.Type, ClusterID: c.Cluster.ID, TPM: hasTPM}), nil
}

// Preflight plans and fails with a PlanError if any step refuses; Init and Join call it before taking the
// node lock.
func (m *Manager) Preflight(ctx context.Context, c *config.MachineConfig) error {
	p, err := m.Plan(ctx, c)
	if err != nil {
		return fmt.Errorf("plan disks: %w", err)
	}
	if p.Err() != nil {
		return &PlanError{Plan: p}
	}
	return nil
}

func (m *Manager) directoryPlan(c *config.MachineConfig) plan.Plan {
	p := plan.Plan{ClusterID: c.Cluster.ID}
	vols := []plan.Volume{plan.State, plan.Ephemeral}
	if c.Machine.Type == config.TypeControlPlane {
		vols = append(vols, plan.Etcd)
	}
	for _, v := range vols {
		p.Steps = append(p.Steps, plan.Step{Volume: v, Field: v.Field(), Action: Directory, Target: v.DefaultTarget(),
			Reason: "sandbox mode: a directory under " + m.Paths.Join() + " (start machined with --host-disks to use block devices)"})
	}
	return p
}

// Hook returns the storage tasks of a sequence (node.Hooks.Storage). They call stateAt with the directory
// STATE lives in once they have found or mounted it.
func (m *Manager) Hook(c *config.MachineConfig, seq fsm.Sequence, stateAt func(dir string)) []sequence.Task {
	if !m.Devices {
		if c == nil {
			return nil
		}
		return []sequence.Task{{Name: "volume-directories", Run: func(context.Context) error {
			var errs []error
			for _, s := range m.directoryPlan(c).Steps {
				errs = append(errs, os.MkdirAll(filepath.Join(m.Paths.Join(), s.Target), 0o755))
			}
			return errors.Join(errs...)
		}}}
	}
	switch seq {
	case fsm.SeqBoot:
		return []sequence.Task{{Name: "find-state", Run: func(ctx context.Context) error { return m.findState(ctx, stateAt) }}}
	case fsm.SeqInit, fsm.SeqJoin, fsm.SeqStart:
		var p plan.Plan
		tasks := []sequence.Task{{Name: "plan-disks", Run: func(ctx context.Context) error {
			var err error
			if p, err = m.Plan(ctx, c); err != nil {
				return err
			}
			m.Log.Info("disk plan\n" + p.String())
			if err := p.Err(); err != nil {
				return &PlanError{Plan: p}
			}
			if seq == fsm.SeqStart {
				return onlyKeep(p)
			}
			return nil
		}}}
		for _, v := range []plan.Volume{plan.State, plan.Ephemeral, plan.Etcd} {
			if v == plan.Etcd && c.Machine.Type != config.TypeControlPlane {
				continue
			}
			tasks = append(tasks, sequence.Task{Name: "mount-" + strings.ToLower(string(v)), Timeout: volumeTimeout,
				Run: func(ctx context.Context) error { return m.apply(ctx, p, v, stateAt) }})
		}
		return tasks
	}
	return nil
}

// onlyKeep makes sure a configured node's boot never formats its data: STATE and ETCD must be there
// already. EPHEMERAL may be formatted again when blank (a reset wiped it, or its disk was replaced): it
// holds nothing that cannot be rebuilt.
func onlyKeep(p plan.Plan) error {
	for _, s := range p.Steps {
		if s.Volume == plan.Ephemeral && s.Action == plan.Format {
			continue
		}
		if s.Action != plan.Keep && s.Action != plan.Tmpfs {
			return fmt.Errorf("%s: the node is configured, so its volumes must already carry its labels, but the plan says %s: %s",
				s.Field, s.Action, s.Reason)
		}
	}
	return nil
}

func (m *Manager) apply(ctx context.Context, p plan.Plan, v plan.Volume, stateAt func(string)) error {
	if err := m.filesystems(ctx); err != nil {
		return err
	}
	for _, s := range p.Steps {
		if s.Volume != v {
			continue
		}
		r, err := m.applier().Apply(ctx, s)
		if err != nil {
			return err
		}
		if len(r.Did) > 0 {
			m.Log.Info("volume", "volume", v, "device", r.Device, "did", strings.Join(r.Did, "; "))
		}
		if v == plan.State {
			m.stateOpened(r)
			stateAt(m.Paths.State())
		}
		return nil
	}
	return fmt.Errorf("%s: no step in the plan", v.Field())
}

func (m *Manager) applier() *apply.Applier {
	root := m.Paths.Root
	m.mu.Lock()
	recovery := m.recovery
	m.mu.Unlock()
	return &apply.Applier{Disks: m.Scanner, Runner: m.Runner, Mounter: m.Mounter, Root: root, MountInfo: m.MountInfo, Reread: m.Reread,
		Crypt: m.Crypt, RecoveryKey: recovery,
		Log: func(format string, args ...any) { m.Log.Info(fmt.Sprintf(format, args...)) }}
}

// findState mounts a STATE partition carrying a Cairn label at boot, so the node lock is read from it. No
// such disk: STATE starts in RAM, under /run.
//
// The disks are read for their signatures only: a STATE disk carries a partition table, so the 2 MiB at
// each end of a blank disk, which the full scan reads to find data without a signature, tell find-state
// nothing: on q35 under emulation, reading them off three blank disks was 0.43 of find-state's 0.53 s of
// scanning. The disk found is read again in full before anything is decided about it: the mount
// (apply.Applier) reads it again with the full scan and refuses a disk that no longer matches the step's,
// so the step must carry what the full scan sees.
func (m *Manager) findState(ctx context.Context, stateAt func(string)) error {
	quick := m.Scanner
	quick.SignaturesOnly = true
	disks, err := m.scanWith(ctx, quick)
	if err != nil {
		return err
	}
	var found []plan.Step
	for _, d := range disks {
		if d.NotCandidate != "" || len(d.Partitions) != 1 {
			continue
		}
		l, ok := plan.ParseLabel(d.Partitions[0])
		if !ok || l.Volume != plan.State || l.Problem != "" {
			continue
		}
		if d, err = m.Scanner.Disk(ctx, d.Name); err != nil {
			return fmt.Errorf("read the STATE disk again: %w", err)
		}
		found = append(found, plan.Step{Volume: plan.State, Field: plan.State.Field(), Action: plan.Keep,
			Target: plan.State.DefaultTarget(), ClusterID: l.Cluster, Disk: &d})
	}
	switch len(found) {
	case 0:
		dir := m.Paths.RunState()
		m.Log.Info("no STATE disk yet: STATE is in RAM until Init or Join mounts one", "dir", dir)
		stateAt(dir)
		return os.MkdirAll(dir, 0o700)
	case 1:
		s := found[0]
		s.FSLabel = plan.State.FSLabel()
		part, fstype, ok := plan.OwnPartition(*s.Disk, plan.State, s.ClusterID)
		blank := !ok || fstype == ""
		if ok && fstype == probe.TypeLUKS {
			made, err := m.encryptedMade(ctx, part.Path)
			if err != nil {
				return fmt.Errorf("STATE on %s: %w", s.Disk.Path, err)
			}
			blank = !made
		}
		if blank {
			// An interrupted format: nothing on it yet. Init or Join will finish it.
			dir := m.Paths.RunState()
			stateAt(dir)
			return os.MkdirAll(dir, 0o700)
		}
		if err := m.filesystems(ctx); err != nil {
			return err
		}
		r, err := m.applier().Apply(ctx, s)
		if err != nil {
			return fmt.Errorf("mount STATE from %s: %w", s.Disk.Path, err)
		}
		m.stateOpened(r)
		stateAt(m.Paths.State())
		m.Log.Info("STATE found", "device", s.Disk.Path, "cluster", s.ClusterID)
		return nil
	}
	var names []string
	for _, s := range found {
		names = append(names, fmt.Sprintf("%s (cluster %s)", s.Disk.Path, s.ClusterID))
	}
	return fmt.Errorf("%d disks carry a Cairn STATE label: %s; detach all but one", len(found), strings.Join(names, ", "))
}

// encryptedMade says whether an encrypted STATE holds its filesystem: a format cut short before it
// (no sealed key yet, or no filesystem) holds nothing, the node lock included.
func (m *Manager) encryptedMade(ctx context.Context, part string) (bool, error) {
	if m.Crypt == nil {
		return false, errors.New("STATE is encrypted, and this node does not open encrypted volumes")
	}
	sealed, made, err := m.Crypt.Inspect(ctx, part)
	return sealed && made, err
}

// StopTasks unmount the volumes, deepest first, before a reboot or shutdown: with what is mounted
// below each volume and every bind of it elsewhere (/etc/kubernetes from STATE, the kubelet's shared
// /var/lib/kubelet), which would otherwise keep the filesystem open, its log dirty, across the reboot.
func (m *Manager) StopTasks() []sequence.Task {
	if !m.Devices {
		return nil
	}
	return []sequence.Task{{Name: "unmount-volumes", Run: func(ctx context.Context) error {
		info := m.MountInfo
		if info == "" {
			info = apply.DefaultMountInfo
		}
		var errs []error
		for _, v := range []plan.Volume{plan.Etcd, plan.Ephemeral, plan.State} {
			target := filepath.Join(m.Paths.Join(), v.DefaultTarget())
			entries, err := apply.ReadMountInfo(info)
			if err != nil {
				return err
			}
			for _, t := range UnmountOrder(entries, target) {
				if err := m.Mounter.Unmount(t, false); err != nil {
					m.Log.Warn("unmount failed; detaching", "target", t, "error", err)
					errs = append(errs, m.Mounter.Unmount(t, true))
				}
			}
		}
		if m.Crypt != nil && errors.Join(errs...) == nil {
			// An encrypted STATE is closed too: its key leaves the kernel before the reboot or a wipe.
			errs = append(errs, m.Crypt.Close(ctx, apply.MapperName(plan.State)))
		}
		return errors.Join(errs...)
	}}}
}

// UnmountOrder lists what to unmount to release the volume mounted at target: the mounts below it and
// the other mounts of its filesystem (binds), latest first, then target itself. Nothing, when nothing is
// mounted at target.
func UnmountOrder(entries []apply.MountEntry, target string) []string {
	dev := ""
	for _, e := range entries {
		if e.Target == target {
			dev = e.Dev
		}
	}
	if dev == "" {
		return nil
	}
	var out []string
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.Target == target || slices.Contains(out, e.Target) {
			continue
		}
		if strings.HasPrefix(e.Target, target+"/") || e.Dev == dev {
			out = append(out, e.Target)
		}
	}
	return append(out, target)
}

// volumeTimeout bounds one volume: mkfs of a large disk under emulation can take minutes.
const volumeTimeout = 10 * time.Minute

// Labels that mark Cairn's boot media (set by the image builder).
const (
	bootISOLabel       = "CAIRN"
	bootPartitionLabel = "CAIRN-EFI"
)

// BootMedia names the disks that carry Cairn's boot labels: the ISO (volume ID CAIRN) or the raw disk
// (a GPT partition named CAIRN-EFI).
func BootMedia(disks []inventory.Disk) []string {
	var out []string
	for _, d := range disks {
		boot := false
		for _, s := range d.Signatures {
			if s.Type == probe.TypeISO9660 && s.Label == bootISOLabel {
				boot = true
			}
		}
		for _, p := range d.Partitions {
			if p.Label == bootPartitionLabel {
				boot = true
			}
		}
		if boot {
			out = append(out, d.Name)
		}
	}
	return out
}

// scan lists the disks, the boot media marked as never to be used: they are found by their labels at
// every scan, since a boot disk's driver may load after machined starts.
func (m *Manager) scan(ctx context.Context) ([]inventory.Disk, error) {
	return m.scanWith(ctx, m.Scanner)
}

func (m *Manager) scanWith(ctx context.Context, s inventory.Scanner) ([]inventory.Disk, error) {
	if m.DisksReady != nil {
		if err := m.DisksReady(ctx); err != nil {
			return nil, fmt.Errorf("wait for the disk drivers: %w", err)
		}
	}
	disks, err := s.Scan(ctx)
	if err != nil {
		return nil, err
	}
	boot := BootMedia(disks)
	for i := range disks {
		for _, b := range boot {
			if disks[i].Name == b {
				disks[i].NotCandidate = inventory.NotCandidateBoot
			}
		}
	}
	return disks, nil
}

// WipeTasks erase the named volumes (state, ephemeral, etcd) after they are unmounted: on block devices
// only the disks that carry this cluster's label for that volume; in sandbox mode the volume's directory.
func (m *Manager) WipeTasks(c *config.MachineConfig, names []string) []sequence.Task {
	if c == nil || len(names) == 0 {
		return nil
	}
	return []sequence.Task{{Name: "wipe-volumes", Timeout: 5 * time.Minute, Run: func(ctx context.Context) error {
		var vols []plan.Volume
		for _, n := range names {
			vols = append(vols, plan.Volume(strings.ToUpper(n)))
		}
		if !m.Devices {
			var errs []error
			for _, v := range vols {
				dir := filepath.Join(m.Paths.Join(), v.DefaultTarget())
				errs = append(errs, removeContents(dir))
			}
			return errors.Join(errs...)
		}
		disks, err := m.scan(ctx)
		if err != nil {
			return err
		}
		for _, v := range vols {
			dev, err := m.applier().WipeVolume(disks, v, c.Cluster.ID)
			if err != nil {
				return err
			}
			if dev == "" {
				m.Log.Info("nothing to wipe: no disk carries this cluster's label for the volume", "volume", v)
				continue
			}
			if m.Reread != nil {
				_ = m.Reread(dev) // the kernel forgets the partition; failing that, the next boot does
			}
			m.Log.Info("volume wiped", "volume", v, "device", dev)
		}
		return nil
	}}}
}

func (m *Manager) filesystems(ctx context.Context) error {
	if m.Filesystems == nil {
		return nil
	}
	if err := m.Filesystems(ctx); err != nil {
		return fmt.Errorf("load the filesystem modules: %w", err)
	}
	return nil
}

// removeContents empties a directory, keeping it.
func removeContents(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}
