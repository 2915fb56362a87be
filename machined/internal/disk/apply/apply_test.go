package apply

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/internal/fakedev"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
	"github.com/cairn-os/cairn/machined/internal/disk/probe"
)

const (
	cluster    = "0123456789abcdef"
	diskSize   = 1 << 30
	diskDev    = "254:16"
	partDev    = "254:17"
	volumeDisk = "vdb"
)

// env is a fake node with one disk, vdb: a sysfs tree and /dev in a temp dir, the disk's contents in
// memory, and a runner and mounter that act on them the way the real tools and kernel would.
type env struct {
	t                          *testing.T
	sysRoot, devRoot, root, mi string
	dev                        *fakedev.Device
	runner                     *fakeRunner
	mounter                    *fakeMounter
	applier                    *Applier
	scanner                    inventory.Scanner
	crypt                      *fakeCrypt // set by withCrypt
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, sysRoot: filepath.Join(dir, "sys"), devRoot: filepath.Join(dir, "dev"), root: filepath.Join(dir, "root"),
		mi: filepath.Join(dir, "mountinfo"), dev: fakedev.New(diskSize)}
	writeFile(t, filepath.Join(e.sysRoot, "block", volumeDisk, "size"), strconv.Itoa(diskSize/512))
	writeFile(t, filepath.Join(e.sysRoot, "block", volumeDisk, "dev"), diskDev)
	writeFile(t, filepath.Join(e.devRoot, volumeDisk), "")
	writeFile(t, e.mi, "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n")
	e.runner = &fakeRunner{env: e, exit: map[string][]int{}}
	e.mounter = &fakeMounter{env: e}
	e.scanner = inventory.Scanner{SysRoot: e.sysRoot, DevRoot: e.devRoot, Opener: opener{e}}
	n := 0
	e.applier = &Applier{Disks: e.scanner, Runner: e.runner, Mounter: e.mounter, Devices: opener{e}, MountInfo: e.mi, Root: e.root,
		NewGUID: func() (gpt.GUID, error) {
			n++
			return gpt.ParseGUID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n))
		}}
	return e
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

type opener struct{ e *env }

func (o opener) Open(path string) (inventory.Device, error) { return o.dev(path) }
func (o opener) OpenWrite(path string) (WritableDevice, error) {
	return o.dev(path)
}
func (o opener) dev(path string) (*fakedev.Device, error) {
	if path != filepath.Join(o.e.devRoot, volumeDisk) {
		return nil, fmt.Errorf("open %s: %w", path, os.ErrNotExist)
	}
	return o.e.dev, nil
}

// fakeRunner plays blockdev (the kernel reads the GPT: the partition appears in sysfs and /dev), mkfs
// (writes a superblock with the label and UUID asked for) and the fsck tools (exit codes from exit).
type fakeRunner struct {
	env   *env
	calls []string
	exit  map[string][]int // per tool, exit codes of successive calls
	// output, when set, is what a failing call prints (default "fake failure").
	output string
}

func (r *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, name+" "+strings.Join(args, " "))
	if codes := r.exit[name]; len(codes) > 0 {
		r.exit[name] = codes[1:]
		if codes[0] != 0 {
			out := []byte("fake failure")
			if r.output != "" {
				out = []byte(r.output)
			}
			return out, &ExitError{Tool: name, Args: args, Code: codes[0], Output: out}
		}
		return nil, nil
	}
	arg := func(flag string) string {
		for i, a := range args {
			if a == flag && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	// mkfs of an opened encrypted volume writes inside it, not onto the disk.
	var dev io.WriterAt = r.env.dev
	off := func() int64 { return r.env.partStart() }
	if c := r.env.crypt; c != nil && len(args) > 0 && args[len(args)-1] == c.mapped {
		dev, off = c.inner, func() int64 { return 0 }
	}
	switch name {
	case "blockdev":
		return nil, r.env.kernelReadsTable()
	case "mkfs.xfs":
		return nil, fakedev.PutXFS(dev, off(), arg("-L"), uuidBytes(strings.TrimPrefix(arg("-m"), "uuid=")))
	case "mkfs.ext4":
		return nil, fakedev.PutExt4(dev, off(), arg("-L"), uuidBytes(arg("-U")))
	}
	return nil, nil
}

func uuidBytes(s string) [16]byte {
	var b [16]byte
	copy(b[:], strings.ReplaceAll(s, "-", ""))
	return b
}

// kernelReadsTable makes sysfs and /dev show partition 1 of the GPT on the disk, as the kernel would.
func (e *env) kernelReadsTable() error {
	sigs, err := probe.Probe(e.dev, diskSize)
	if err != nil {
		return err
	}
	for _, s := range sigs {
		if s.Type == probe.TypeGPT && len(s.Partitions) > 0 {
			p := s.Partitions[0]
			dir := filepath.Join(e.sysRoot, "block", volumeDisk, volumeDisk+"1")
			writeFile(e.t, filepath.Join(dir, "partition"), "1")
			writeFile(e.t, filepath.Join(dir, "start"), strconv.FormatInt(p.Start/512, 10))
			writeFile(e.t, filepath.Join(dir, "size"), strconv.FormatInt(p.Size/512, 10))
			writeFile(e.t, filepath.Join(dir, "dev"), partDev)
			writeFile(e.t, filepath.Join(e.devRoot, volumeDisk+"1"), "")
			return nil
		}
	}
	return fmt.Errorf("BLKRRPART: no partition table")
}

func (e *env) partStart() int64 {
	b, err := os.ReadFile(filepath.Join(e.sysRoot, "block", volumeDisk, volumeDisk+"1", "start"))
	if err != nil {
		e.t.Fatalf("mkfs before the kernel knew the partition: %v", err)
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n * 512
}

// fakeMounter records mounts in the fake mount table.
type fakeMounter struct {
	env    *env
	mounts []string
}

func (m *fakeMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	m.mounts = append(m.mounts, fmt.Sprintf("%s %s %s %#x %s", source, strings.TrimPrefix(target, m.env.root), fstype, flags, data))
	dev := partDev
	if fstype == "tmpfs" {
		dev = "0:99"
	}
	if c := m.env.crypt; c != nil && source == c.mapped {
		dev = mapperDev
	}
	f, err := os.OpenFile(m.env.mi, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%d 22 %s / %s rw shared:5 - %s %s rw\n", 100+len(m.mounts), dev, strings.ReplaceAll(target, " ", `\040`), fstype, source)
	return err
}

// plan makes a fresh plan for a worker whose STATE is vdb, and returns its STATE step.
func (e *env) plan(spec config.DiskSpec) plan.Step {
	e.t.Helper()
	disks, err := e.scanner.Scan(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	spec.Selector.Path = filepath.Join(e.devRoot, volumeDisk)
	p := plan.Make(plan.Input{Disks: disks, MachineType: config.TypeWorker, ClusterID: cluster, TPM: e.crypt != nil,
		Config: config.Disks{State: spec, Ephemeral: config.DiskSpec{Tmpfs: true}}})
	return p.Steps[0]
}

func TestApplyBlankThenIdempotent(t *testing.T) {
	e := newEnv(t)
	step := e.plan(config.DiskSpec{})
	if step.Action != plan.Format {
		t.Fatalf("plan of a blank disk: %s (%s), want format", step.Action, step.Reason)
	}
	r, err := e.applier.Apply(context.Background(), step)
	if err != nil {
		t.Fatalf("Apply(format) error: %v", err)
	}
	part := filepath.Join(e.devRoot, "vdb1")
	wantDid := []string{"partitioned " + filepath.Join(e.devRoot, "vdb"), "formatted " + part + " as xfs",
		"mounted " + part + " at " + filepath.Join(e.root, "/system/state")}
	if diff := cmp.Diff(wantDid, r.Did); diff != "" {
		t.Errorf("Apply(format).Did (-want +got):\n%s", diff)
	}
	wantMounts := []string{part + " /system/state xfs 0xe "}
	if diff := cmp.Diff(wantMounts, e.mounter.mounts); diff != "" {
		t.Errorf("mounts after Apply(format) (-want +got):\n%s", diff)
	}
	// The disk now reads back as Cairn's, for this cluster and volume.
	d, err := e.scanner.Disk(context.Background(), volumeDisk)
	if err != nil {
		t.Fatal(err)
	}
	if _, fstype, ok := plan.OwnPartition(d, plan.State, cluster); !ok || fstype != "xfs" {
		t.Errorf("OwnPartition(after format) = %q, %v; want xfs, true\n%s", fstype, ok, plan.DescribeContents(d))
	}

	// Same plan again (a retry): everything is in place, nothing is done.
	calls := len(e.runner.calls)
	r, err = e.applier.Apply(context.Background(), step)
	if err != nil || len(r.Did) != 0 || len(e.runner.calls) != calls || len(e.mounter.mounts) != 1 {
		t.Errorf("Apply(same plan again) = %v, %v; ran %v; want nothing done", r.Did, err, e.runner.calls[calls:])
	}

	// A fresh plan on the next boot: keep, check, mount.
	writeFile(t, e.mi, "22 1 254:0 / / rw - ext4 /dev/vda rw\n")
	step = e.plan(config.DiskSpec{Wipe: true}) // wipe: true must not matter for Cairn's own disk
	if step.Action != plan.Keep {
		t.Fatalf("plan after format: %s (%s), want keep", step.Action, step.Reason)
	}
	writesBefore := e.dev.Writes
	r, err = e.applier.Apply(context.Background(), step)
	if err != nil {
		t.Fatalf("Apply(keep) error: %v", err)
	}
	wantDid = []string{"checked " + part + ": clean", "mounted " + part + " at " + filepath.Join(e.root, "/system/state")}
	if diff := cmp.Diff(wantDid, r.Did); diff != "" {
		t.Errorf("Apply(keep).Did (-want +got):\n%s", diff)
	}
	if e.dev.Writes != writesBefore {
		t.Errorf("Apply(keep) wrote to the disk %d times, want 0", e.dev.Writes-writesBefore)
	}
}

func TestApplyRefusesChangedDisk(t *testing.T) {
	e := newEnv(t)
	step := e.plan(config.DiskSpec{})
	// Someone puts a filesystem on the disk between plan and apply.
	if err := fakedev.PutExt4(e.dev, 0, "late", [16]byte{1}); err != nil {
		t.Fatal(err)
	}
	writes := e.dev.Writes
	_, err := e.applier.Apply(context.Background(), step)
	if err == nil || !strings.Contains(err.Error(), "changed since the plan") || !strings.Contains(err.Error(), `ext4 filesystem labelled "late"`) {
		t.Fatalf("Apply(format of a disk that changed) error = %v, want it to say the disk changed and what is on it now", err)
	}
	if e.dev.Writes != writes || len(e.runner.calls) != 0 || len(e.mounter.mounts) != 0 {
		t.Errorf("Apply(changed disk) wrote %d times, ran %v, mounted %v; want nothing", e.dev.Writes-writes, e.runner.calls, e.mounter.mounts)
	}
}

func TestApplyRefusesSwappedDisk(t *testing.T) {
	e := newEnv(t)
	step := e.plan(config.DiskSpec{})
	writeFile(t, filepath.Join(e.sysRoot, "block", volumeDisk, "serial"), "another-disk")
	_, err := e.applier.Apply(context.Background(), step)
	if err == nil || !strings.Contains(err.Error(), "no longer the disk the plan chose") {
		t.Fatalf("Apply(on a different disk) error = %v, want it to say the disk is not the planned one", err)
	}
}

func TestApplyWipeAndFormat(t *testing.T) {
	e := newEnv(t)
	if err := fakedev.PutExt4(e.dev, 0, "old", [16]byte{9}); err != nil {
		t.Fatal(err)
	}
	if step := e.plan(config.DiskSpec{}); step.Action != plan.Refuse {
		t.Fatalf("plan of a used disk without wipe: %s, want refuse", step.Action)
	}
	step := e.plan(config.DiskSpec{Wipe: true, Filesystem: config.FilesystemExt4})
	if step.Action != plan.WipeAndFormat {
		t.Fatalf("plan with wipe: %s (%s), want wipe-and-format", step.Action, step.Reason)
	}
	r, err := e.applier.Apply(context.Background(), step)
	if err != nil {
		t.Fatalf("Apply(wipe-and-format) error: %v", err)
	}
	if r.Did[0] != "wiped "+filepath.Join(e.devRoot, "vdb") || r.Filesystem != "ext4" {
		t.Errorf("Apply(wipe-and-format) = %+v, want a wipe first and ext4", r)
	}
	d, err := e.scanner.Disk(context.Background(), volumeDisk)
	if err != nil {
		t.Fatal(err)
	}
	if _, fstype, ok := plan.OwnPartition(d, plan.State, cluster); !ok || fstype != "ext4" {
		t.Errorf("after wipe-and-format: %s; want Cairn's ext4", plan.DescribeContents(d))
	}
}

func TestApplyFsck(t *testing.T) {
	tests := []struct {
		name    string
		fs      string
		exits   map[string][]int
		output  string
		wantErr string
		wantDid string
	}{
		{name: "ext4 repaired", fs: "ext4", exits: map[string][]int{"e2fsck": {1}}, wantDid: "errors found and repaired"},
		{name: "ext4 unrepairable", fs: "ext4", exits: map[string][]int{"e2fsck": {4}}, wantErr: "cannot repair on its own"},
		{name: "xfs corrupt then repaired", fs: "xfs", exits: map[string][]int{"xfs_repair": {1, 0}}, wantDid: "corruption found and repaired"},
		{name: "xfs corrupt beyond repair", fs: "xfs", exits: map[string][]int{"xfs_repair": {1, 1}}, wantErr: "could not repair it"},
		{name: "xfs dirty log is left to the mount", fs: "xfs", exits: map[string][]int{"xfs_repair": {2}}, wantDid: "log needs replay"},
		// What xfs_repair -n really says (and exits 1) after a node went down with the volume mounted: the
		// log is replayed by the mount, and a repair now would refuse (exit 2).
		{name: "xfs -n reports a dirty log", fs: "xfs", exits: map[string][]int{"xfs_repair": {1, 2}},
			output: "ALERT: The filesystem has valuable metadata changes in a log which is being\nignored because the -n option was used.", wantDid: "log needs replay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if _, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{Filesystem: tt.fs})); err != nil {
				t.Fatal(err)
			}
			writeFile(t, e.mi, "")
			e.mounter.mounts = nil
			e.runner.exit, e.runner.output = tt.exits, tt.output
			r, err := e.applier.Apply(context.Background(), e.plan(config.DiskSpec{}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply(keep, %s) error = %v, want %q", tt.name, err, tt.wantErr)
				}
				if len(e.mounter.mounts) != 0 {
					t.Errorf("Apply(keep, %s) mounted %v after a failed check", tt.name, e.mounter.mounts)
				}
				return
			}
			if err != nil || len(r.Did) == 0 || !strings.Contains(r.Did[0], tt.wantDid) || len(e.mounter.mounts) != 1 {
				t.Errorf("Apply(keep, %s) = %v, %v; want %q then a mount", tt.name, r.Did, err, tt.wantDid)
			}
		})
	}
}

func TestApplyResumesInterruptedFormat(t *testing.T) {
	e := newEnv(t)
	step := e.plan(config.DiskSpec{})
	e.runner.exit["mkfs.xfs"] = []int{1} // power cut between partitioning and mkfs, in effect
	if _, err := e.applier.Apply(context.Background(), step); err == nil {
		t.Fatal("Apply with a failing mkfs = nil error")
	}
	next := e.plan(config.DiskSpec{})
	if next.Action != plan.Format {
		t.Fatalf("plan after an interrupted format: %s (%s), want format", next.Action, next.Reason)
	}
	r, err := e.applier.Apply(context.Background(), next)
	if err != nil {
		t.Fatalf("Apply(resume) error: %v", err)
	}
	if strings.HasPrefix(r.Did[0], "partitioned") {
		t.Errorf("Apply(resume) = %v: partitioned again, want only mkfs and mount", r.Did)
	}
}

func TestApplyTmpfsAndRefuse(t *testing.T) {
	e := newEnv(t)
	p := plan.Make(plan.Input{MachineType: config.TypeWorker, ClusterID: cluster,
		Config: config.Disks{State: config.DiskSpec{}, Ephemeral: config.DiskSpec{Tmpfs: true}}})
	if _, err := e.applier.Apply(context.Background(), p.Steps[0]); err == nil || !strings.Contains(err.Error(), "selects no disk") {
		t.Errorf("Apply(refuse) error = %v, want the refusal", err)
	}
	for i := range 2 {
		if _, err := e.applier.Apply(context.Background(), p.Steps[1]); err != nil {
			t.Fatalf("Apply(tmpfs) #%d error: %v", i+1, err)
		}
	}
	if diff := cmp.Diff([]string{"tmpfs /var tmpfs 0x0 mode=0755"}, e.mounter.mounts); diff != "" {
		t.Errorf("mounts after two Apply(tmpfs) (-want +got):\n%s", diff)
	}
}

func TestParseMountInfo(t *testing.T) {
	e, ok := parseMountInfo(`36 35 98:0 /mnt1 /mnt\040two rw,noatime master:1 - ext3 /dev/root rw,errors=continue`)
	want := MountEntry{Dev: "98:0", Target: "/mnt two", FSType: "ext3", Source: "/dev/root", Options: "rw,noatime"}
	if !ok || e != want {
		t.Errorf("parseMountInfo() = %+v, %v; want %+v", e, ok, want)
	}
	if _, ok := parseMountInfo("garbage"); ok {
		t.Errorf("parseMountInfo(garbage) ok, want not")
	}
}
