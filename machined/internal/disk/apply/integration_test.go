//go:build integration

package apply

// Root integration tests: real loop devices, the real mkfs/fsck tools, real mounts. Each test runs on a
// thread of its own in a private mount namespace, and detaches and removes everything it made even when
// it fails. Loop devices have no serial, so the disks are selected by path.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/disk/gpt"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/disk/plan"
)

const itCluster = "it0cluster0a1b2"

// loopSize is unusual on purpose, so a size-range selector matches only this test's loop devices.
const loopSize = 523<<20 + 7*4096

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices, mkfs and mounts")
	}
	needTools(t, "losetup", "blockdev", "mkfs.xfs", "mkfs.ext4", "xfs_repair", "e2fsck")
}

func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CAIRN_REQUIRE_TOOLS") == "1" {
				t.Fatalf("tool %s is required (CAIRN_REQUIRE_TOOLS=1) but not found", n)
			}
			t.Skipf("tool %s not found", n)
		}
	}
}

// privateMountNS moves the test's goroutine onto a thread of its own in a new mount namespace. The thread is
// never unlocked, so Go ends it with the test, and the namespace with it; tools the test runs are forked
// from this thread and share the namespace.
func privateMountNS(t *testing.T) {
	t.Helper()
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		t.Fatalf("unshare(CLONE_NEWNS): %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make / rprivate: %v", err)
	}
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newLoop makes a sparse backing file, lets prepare write to it, and attaches it with partition scanning.
func newLoop(t *testing.T, prepare func(file string)) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "disk.img")
	if prepare != nil {
		prepare(file)
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if st.Size() < loopSize {
		if err := f.Truncate(loopSize); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	dev := sh(t, "losetup", "--find", "--show", "--partscan", file)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", dev, err, out)
		}
	})
	t.Logf("%s backed by %s", dev, file)
	return dev
}

// sysMounter mounts for real and unmounts when the test ends.
type sysMounter struct{ t *testing.T }

func (m sysMounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return err
	}
	m.t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	return nil
}

type node struct {
	t       *testing.T
	root    string
	applier *Applier
	scanner inventory.Scanner
}

func newNode(t *testing.T) *node {
	scanner := inventory.Scanner{SysRoot: "/sys", DevRoot: "/dev"}
	root := t.TempDir()
	n := &node{t: t, root: root, scanner: scanner, applier: &Applier{Disks: scanner, Runner: ExecRunner{}, Mounter: sysMounter{t},
		Root: root, Log: func(f string, a ...any) { t.Logf(f, a...) }}}
	if !kernelReadsGPT(t) {
		t.Log("this kernel does not read GPT partition tables: partitions are reached through loop devices over their byte range")
		n.applier.Partitions = &loopPartitions{t: t, made: map[string][2]string{}}
	}
	return n
}

// loopPartitions stands in for the kernel's partition devices on kernels built without GPT support (the
// sandbox VM's): a loop device over the partition's byte range of the disk.
type loopPartitions struct {
	t    *testing.T
	made map[string][2]string
}

func (l *loopPartitions) Device(_ context.Context, d inventory.Disk, n int) (string, string, error) {
	for _, p := range d.Partitions {
		if p.Number != n {
			continue
		}
		key := fmt.Sprintf("%s@%d+%d", d.Path, p.Start, p.Size)
		if m, ok := l.made[key]; ok {
			return m[0], m[1], nil
		}
		dev := sh(l.t, "losetup", "--find", "--show", "--offset", fmt.Sprint(p.Start), "--sizelimit", fmt.Sprint(p.Size), d.Path)
		l.t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
		num, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "dev"))
		if err != nil {
			return "", "", err
		}
		l.made[key] = [2]string{dev, strings.TrimSpace(string(num))}
		return dev, strings.TrimSpace(string(num)), nil
	}
	return "", "", fmt.Errorf("no partition %d on %s", n, d.Path)
}

var gptSupport struct {
	once sync.Once
	ok   bool
}

// kernelReadsGPT finds out once whether the running kernel creates partition devices for a GPT.
func kernelReadsGPT(t *testing.T) bool {
	gptSupport.once.Do(func() {
		file := filepath.Join(t.TempDir(), "gpt-check.img")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(file, 16<<20); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(file, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		tab := gpt.Table{SectorSize: 512, Size: 16 << 20}
		tab.Partitions = []gpt.Partition{{Type: gpt.GUID{1}, GUID: gpt.GUID{2}, FirstLBA: tab.AlignedStart(), LastLBA: tab.LastUsable()}}
		err = tab.Write(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		dev := sh(t, "losetup", "--find", "--show", "--partscan", file)
		defer exec.Command("losetup", "-d", dev).Run()
		part := filepath.Join("/sys/block", filepath.Base(dev), filepath.Base(dev)+"p1")
		for range 20 {
			if _, err := os.Stat(part); err == nil {
				gptSupport.ok = true
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return gptSupport.ok
}

// plan plans a control-plane node: STATE and EPHEMERAL in RAM, ETCD on the disk at path.
func (n *node) plan(cluster string, etcd config.DiskSpec) plan.Step {
	n.t.Helper()
	disks, err := n.scanner.Scan(context.Background())
	if err != nil {
		n.t.Fatal(err)
	}
	p := plan.Make(plan.Input{Disks: disks, MachineType: config.TypeControlPlane, ClusterID: cluster,
		Config: config.Disks{State: config.DiskSpec{Tmpfs: true}, Ephemeral: config.DiskSpec{Tmpfs: true}, Etcd: &etcd}})
	n.t.Logf("plan:\n%s", p)
	return p.Steps[2]
}

func (n *node) target() string { return filepath.Join(n.root, "/var/lib/etcd") }

func (n *node) unmount() {
	n.t.Helper()
	if err := unix.Unmount(n.target(), 0); err != nil {
		n.t.Fatalf("unmount %s: %v", n.target(), err)
	}
}

// ends hashes the first and last MiB of a device: what every known signature touches.
func ends(t *testing.T, dev string) [2][32]byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	var out [2][32]byte
	for i, off := range []int64{0, size - 1<<20} {
		b := make([]byte, 1<<20)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		out[i] = sha256.Sum256(b)
	}
	return out
}

func TestIntegrationFormatThenKeep(t *testing.T) {
	needRoot(t)
	for _, fs := range []string{config.FilesystemXFS, config.FilesystemExt4} {
		t.Run(fs, func(t *testing.T) {
			privateMountNS(t)
			dev := newLoop(t, nil)
			n := newNode(t)
			spec := config.DiskSpec{Selector: config.Selector{Path: dev}, Filesystem: fs}
			step := n.plan(itCluster, spec)
			if step.Action != plan.Format {
				t.Fatalf("plan(blank %s) = %s: %s; want format", dev, step.Action, step.Reason)
			}
			start := time.Now()
			r, err := n.applier.Apply(context.Background(), step)
			if err != nil {
				t.Fatalf("Apply(format %s) error: %v", dev, err)
			}
			t.Logf("format+mount took %s: %v", time.Since(start).Round(time.Millisecond), r.Did)
			if err := os.WriteFile(filepath.Join(n.target(), "member"), []byte("etcd data"), 0o600); err != nil {
				t.Fatalf("write to the mounted volume: %v", err)
			}
			uuid := r.UUID

			// Same plan again while mounted: nothing to do.
			if r, err := n.applier.Apply(context.Background(), step); err != nil || len(r.Did) != 0 {
				t.Fatalf("Apply(same plan, mounted) = %v, %v; want nothing done", r.Did, err)
			}

			// "Reboot": unmount, plan afresh, apply: kept, checked, mounted, data still there.
			n.unmount()
			spec.Wipe = true // must not matter: the disk is this cluster's
			step = n.plan(itCluster, spec)
			if step.Action != plan.Keep {
				t.Fatalf("plan(after format) = %s: %s; want keep", step.Action, step.Reason)
			}
			r, err = n.applier.Apply(context.Background(), step)
			if err != nil {
				t.Fatalf("Apply(keep %s) error: %v", dev, err)
			}
			got, err := os.ReadFile(filepath.Join(n.target(), "member"))
			if err != nil || string(got) != "etcd data" {
				t.Errorf("after keep, member = %q, %v; want the data written before", got, err)
			}
			d, err := n.scanner.Disk(context.Background(), filepath.Base(dev))
			if err != nil {
				t.Fatal(err)
			}
			if sigs := d.Partitions[0].Signatures; len(sigs) != 1 || sigs[0].UUID != uuid || sigs[0].Type != fs {
				t.Errorf("after keep, partition holds %v; want the %s made first (UUID %s)", sigs, fs, uuid)
			}
		})
	}
}

// foreign is every signature Cairn must refuse, made by the real tool on the loop device or its file.
var foreign = []struct {
	name     string
	tools    []string
	onFile   func(t *testing.T, file string)
	onDev    func(t *testing.T, dev string)
	wantText string // in the refusal
}{
	{name: "xfs", tools: []string{"mkfs.xfs"}, onDev: func(t *testing.T, d string) { sh(t, "mkfs.xfs", "-q", "-L", "olddata", d) }, wantText: `xfs filesystem labelled "olddata"`},
	{name: "ext4", tools: []string{"mkfs.ext4"}, onDev: func(t *testing.T, d string) { sh(t, "mkfs.ext4", "-q", "-L", "data", d) }, wantText: `ext4 filesystem labelled "data"`},
	{name: "vfat", tools: []string{"mkfs.vfat"}, onDev: func(t *testing.T, d string) { sh(t, "mkfs.vfat", "-n", "USB", d) }, wantText: `vfat (FAT32) filesystem labelled "USB"`},
	{name: "btrfs", tools: []string{"mkfs.btrfs"}, onDev: func(t *testing.T, d string) { sh(t, "mkfs.btrfs", "-q", "-L", "pool", d) }, wantText: `btrfs filesystem labelled "pool"`},
	{name: "swap", tools: []string{"mkswap"}, onDev: func(t *testing.T, d string) { sh(t, "mkswap", d) }, wantText: "swap space"},
	{name: "LUKS2", tools: []string{"cryptsetup"}, onFile: func(t *testing.T, f string) {
		key := filepath.Join(t.TempDir(), "key")
		if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
			t.Fatal(err)
		}
		sh(t, "truncate", "-s", fmt.Sprint(loopSize), f)
		sh(t, "cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", key, f)
	}, wantText: "LUKS2 encrypted volume"},
	{name: "LVM PV", tools: []string{"pvcreate"}, onDev: func(t *testing.T, d string) {
		sh(t, "pvcreate", "--config", `devices { use_devicesfile = 0 hints = "none" }`, "-y", d)
	}, wantText: "LVM2 physical volume"},
	{name: "MD RAID", tools: []string{"mdadm"}, onDev: func(t *testing.T, d string) {
		if _, err := os.Stat("/proc/mdstat"); err != nil {
			t.Skip("kernel has no md driver: cannot create an MD array here")
		}
		md := "/dev/md/cairn-apply-test"
		sh(t, "mdadm", "--create", md, "--run", "--level=1", "--raid-devices=2", "--metadata=1.2", d, "missing")
		sh(t, "mdadm", "--stop", md)
	}, wantText: "MD RAID member"},
	{name: "GPT", tools: []string{"sgdisk"}, onDev: func(t *testing.T, d string) { sh(t, "sgdisk", "-o", "-n", "1:2048:+100M", "-c", "1:home", d) }, wantText: `partitions: #1 "home"`},
	{name: "MBR", tools: []string{"sfdisk"}, onFile: func(t *testing.T, f string) {
		sh(t, "truncate", "-s", fmt.Sprint(loopSize), f)
		cmd := exec.Command("sfdisk", "-q", f)
		cmd.Stdin = strings.NewReader("label: dos\nstart=2048,size=204800,type=83\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sfdisk: %v\n%s", err, out)
		}
	}, wantText: "DOS/MBR partition table"},
	{name: "ISO9660", tools: []string{"xorriso"}, onFile: func(t *testing.T, f string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); err != nil {
			t.Fatal(err)
		}
		sh(t, "xorriso", "-as", "mkisofs", "-quiet", "-V", "INSTALLER", "-o", f, dir)
	}, wantText: `ISO9660 image labelled "INSTALLER"`},
	{name: "squashfs", tools: []string{"mksquashfs"}, onFile: func(t *testing.T, f string) {
		sh(t, "mksquashfs", t.TempDir(), f, "-quiet", "-noappend", "-no-progress")
	}, wantText: "squashfs 4.0 image"},
}

// TestIntegrationForeignRefused: each foreign signature is refused by the plan, naming the device, what was
// found and the wipe field, and Apply of that step writes nothing.
func TestIntegrationForeignRefused(t *testing.T) {
	needRoot(t)
	for _, tt := range foreign {
		t.Run(tt.name, func(t *testing.T) {
			needTools(t, tt.tools...)
			privateMountNS(t)
			var dev string
			if tt.onFile != nil {
				dev = newLoop(t, func(f string) { tt.onFile(t, f) })
			} else {
				dev = newLoop(t, nil)
				tt.onDev(t, dev)
			}
			before := ends(t, dev)
			n := newNode(t)
			step := n.plan(itCluster, config.DiskSpec{Selector: config.Selector{Path: dev}})
			if step.Action != plan.Refuse {
				t.Fatalf("plan(%s on %s) = %s: %s; want refuse", tt.name, dev, step.Action, step.Reason)
			}
			for _, want := range []string{"machine.disks.etcd: " + dev, tt.wantText, "set machine.disks.etcd.wipe: true"} {
				if !strings.Contains(step.Error, want) {
					t.Errorf("plan(%s) error = %q, want it to contain %q", tt.name, step.Error, want)
				}
			}
			if _, err := n.applier.Apply(context.Background(), step); err == nil {
				t.Errorf("Apply(refused step) = nil error")
			}
			if after := ends(t, dev); after != before {
				t.Errorf("%s: first/last MiB of %s changed although the plan refused", tt.name, dev)
			}
		})
	}
}

func TestIntegrationWipe(t *testing.T) {
	needRoot(t)
	privateMountNS(t)
	dev := newLoop(t, nil)
	sh(t, "mkfs.ext4", "-q", "-L", "data", dev)
	n := newNode(t)
	step := n.plan(itCluster, config.DiskSpec{Selector: config.Selector{Path: dev}, Wipe: true})
	if step.Action != plan.WipeAndFormat {
		t.Fatalf("plan(ext4, wipe: true) = %s: %s; want wipe-and-format", step.Action, step.Reason)
	}
	r, err := n.applier.Apply(context.Background(), step)
	if err != nil {
		t.Fatalf("Apply(wipe-and-format) error: %v", err)
	}
	t.Logf("did: %v", r.Did)
	d, err := n.scanner.Disk(context.Background(), filepath.Base(dev))
	if err != nil {
		t.Fatal(err)
	}
	if _, fstype, ok := plan.OwnPartition(d, plan.Etcd, itCluster); !ok || fstype != "xfs" {
		t.Errorf("after wipe-and-format %s holds %s; want Cairn's xfs", dev, plan.DescribeContents(d))
	}
}

func TestIntegrationOtherCluster(t *testing.T) {
	needRoot(t)
	privateMountNS(t)
	dev := newLoop(t, nil)
	n := newNode(t)
	spec := config.DiskSpec{Selector: config.Selector{Path: dev}}
	if _, err := n.applier.Apply(context.Background(), n.plan("clusterA0000001", spec)); err != nil {
		t.Fatalf("Apply(format for cluster A): %v", err)
	}
	n.unmount()
	before := ends(t, dev)
	step := n.plan("clusterB0000002", spec)
	if step.Action != plan.Refuse || !strings.Contains(step.Error, `another Cairn cluster (cluster ID "clusterA0000001")`) {
		t.Fatalf("plan(cluster B on A's disk) = %s: %s; want a refusal naming cluster A", step.Action, step.Reason)
	}
	if _, err := n.applier.Apply(context.Background(), step); err == nil {
		t.Errorf("Apply(refused step) = nil error")
	}
	if ends(t, dev) != before {
		t.Errorf("cluster A's disk %s changed although cluster B's plan refused", dev)
	}
}

func TestIntegrationSelectors(t *testing.T) {
	needRoot(t)
	privateMountNS(t)
	devA, devB := newLoop(t, nil), newLoop(t, nil)
	n := newNode(t)
	step := n.plan(itCluster, config.DiskSpec{Selector: config.Selector{MinSize: loopSize, MaxSize: loopSize}})
	if step.Action != plan.Refuse || !strings.Contains(step.Error, devA+" (") || !strings.Contains(step.Error, devB+" (") {
		t.Errorf("plan(selector matching two loop devices) = %s: %s; want a refusal naming %s and %s", step.Action, step.Error, devA, devB)
	}
	step = n.plan(itCluster, config.DiskSpec{Selector: config.Selector{Path: "/dev/disk/by-id/virtio-missing"}})
	if step.Action != plan.Refuse || !strings.Contains(step.Error, `no disk matches {path: "/dev/disk/by-id/virtio-missing"}`) {
		t.Errorf("plan(selector matching nothing) = %s: %s; want a refusal naming the path looked for", step.Action, step.Error)
	}
	n.scanner.Boot = []string{devA}
	step = n.plan(itCluster, config.DiskSpec{Selector: config.Selector{Path: devA}})
	if step.Action != plan.Refuse || !strings.Contains(step.Error, devA+" is the boot medium") {
		t.Errorf("plan(selecting the boot disk) = %s: %s; want a refusal", step.Action, step.Error)
	}
}

// TestIntegrationKernelPartitions: on a kernel that reads GPT, the partition Cairn writes shows up as the
// kernel's own device (loop0p1), which the other tests replace with loop devices where it cannot.
func TestIntegrationKernelPartitions(t *testing.T) {
	needRoot(t)
	if !kernelReadsGPT(t) {
		t.Skip("this kernel does not read GPT partition tables (CONFIG_EFI_PARTITION off); the e2e tests cover it")
	}
	privateMountNS(t)
	dev := newLoop(t, nil)
	n := newNode(t)
	r, err := n.applier.Apply(context.Background(), n.plan(itCluster, config.DiskSpec{Selector: config.Selector{Path: dev}}))
	if err != nil {
		t.Fatalf("Apply(format %s) error: %v", dev, err)
	}
	if r.Device != dev+"p1" {
		t.Errorf("Apply(format %s).Device = %q, want the kernel's partition %sp1", dev, r.Device, dev)
	}
}

// TestIntegrationFsck: a volume damaged while unmounted is checked before the mount; what the tool repairs
// on its own is repaired and mounted, what it cannot is an error and stays unmounted.
func TestIntegrationFsck(t *testing.T) {
	needRoot(t)
	needTools(t, "xfs_db", "debugfs")
	tests := []struct {
		name    string
		fs      string
		damage  [][]string // commands, the partition's device appended
		wantDid string
		wantErr string
	}{
		{name: "xfs corrupt root inode pointer", fs: config.FilesystemXFS,
			damage:  [][]string{{"xfs_db", "-x", "-c", "sb 0", "-c", "write -d rootino 0"}},
			wantDid: "corruption found and repaired"},
		{name: "ext4 dirty with a wrong free-block count", fs: config.FilesystemExt4,
			damage:  [][]string{{"debugfs", "-w", "-R", "ssv state 0"}, {"debugfs", "-w", "-R", "ssv free_blocks_count 12"}},
			wantDid: "errors found and repaired"},
		{name: "ext4 dirty with the root inode cleared", fs: config.FilesystemExt4,
			damage:  [][]string{{"debugfs", "-w", "-R", "ssv state 0"}, {"debugfs", "-w", "-R", "clri <2>"}},
			wantErr: "cannot repair on its own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			privateMountNS(t)
			dev := newLoop(t, nil)
			n := newNode(t)
			spec := config.DiskSpec{Selector: config.Selector{Path: dev}, Filesystem: tt.fs}
			r, err := n.applier.Apply(context.Background(), n.plan(itCluster, spec))
			if err != nil {
				t.Fatalf("Apply(format) error: %v", err)
			}
			n.unmount()
			for _, c := range tt.damage {
				sh(t, c[0], append(c[1:], r.Device)...)
			}
			step := n.plan(itCluster, spec)
			if step.Action != plan.Keep {
				t.Fatalf("plan(damaged %s) = %s: %s; want keep (the label is intact)", tt.fs, step.Action, step.Reason)
			}
			r, err = n.applier.Apply(context.Background(), step)
			mounts, _ := mountsAt(DefaultMountInfo, n.target())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply(keep, %s) error = %v, want %q", tt.name, err, tt.wantErr)
				}
				if len(mounts) != 0 {
					t.Errorf("Apply(keep, %s) left %s mounted after a failed check", tt.name, n.target())
				}
				return
			}
			if err != nil || len(r.Did) == 0 || !strings.Contains(r.Did[0], tt.wantDid) {
				t.Fatalf("Apply(keep, %s) = %v, %v; want %q", tt.name, r.Did, err, tt.wantDid)
			}
			if len(mounts) == 0 {
				t.Errorf("Apply(keep, %s): %s not mounted after the repair", tt.name, n.target())
			}
		})
	}
}

// A volume's disk that turned read-only (a failing disk the kernel or its controller made read-only,
// here `blockdev --setro`) is not mounted read-write on the next boot: the plan refuses it with the reason,
// and a plan made before it turned read-only fails at Apply with an error naming the disk, its data kept.
func TestIntegrationReadOnlyDisk(t *testing.T) {
	needRoot(t)
	privateMountNS(t)
	dev := newLoop(t, nil)
	n := newNode(t)
	spec := config.DiskSpec{Selector: config.Selector{Path: dev}, Filesystem: config.FilesystemXFS}
	if _, err := n.applier.Apply(context.Background(), n.plan(itCluster, spec)); err != nil {
		t.Fatalf("Apply(format %s): %v", dev, err)
	}
	if err := os.WriteFile(filepath.Join(n.target(), "member"), []byte("etcd data"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.unmount()
	keep := n.plan(itCluster, spec)
	if keep.Action != plan.Keep {
		t.Fatalf("plan(after format) = %s: %s; want keep", keep.Action, keep.Reason)
	}
	before := ends(t, dev)

	sh(t, "blockdev", "--setro", dev)
	t.Cleanup(func() { _ = exec.Command("blockdev", "--setrw", dev).Run() })

	step := n.plan(itCluster, spec)
	if step.Action != plan.Refuse || !strings.Contains(step.Error, dev) || !strings.Contains(step.Error, "read-only") {
		t.Errorf("plan(read-only %s) = %s: %q; want a refusal naming the disk as read-only", dev, step.Action, step.Error)
	}
	_, err := n.applier.Apply(context.Background(), keep)
	if err == nil {
		t.Fatal("Apply(keep) of a disk that turned read-only succeeded")
	}
	if !strings.Contains(err.Error(), dev) {
		t.Errorf("Apply(keep) of a read-only disk = %q; want it to name %s", err, dev)
	}
	t.Logf("Apply(keep) of the read-only disk: %v", err)
	if after := ends(t, dev); after != before {
		t.Error("the read-only disk changed")
	}
	sh(t, "blockdev", "--setrw", dev)
	if _, err := n.applier.Apply(context.Background(), n.plan(itCluster, spec)); err != nil {
		t.Fatalf("Apply(keep) once the disk is writable again: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(n.target(), "member")); err != nil || string(got) != "etcd data" {
		t.Errorf("after the disk is writable again, member = %q, %v; want the data written before", got, err)
	}
}
