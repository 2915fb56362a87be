package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/internal/modload"
	"github.com/cairn-os/cairn/machined/internal/modules"
)

// fakeKernel is a modules directory, a sysfs with devices and a /proc/modules, and a loader that adds
// what a loaded module brings: a loaded virtio_pci makes the virtio devices behind it appear.
type fakeKernel struct {
	t                  *testing.T
	dir, sys, procFile string
	mu                 sync.Mutex
	loaded             []string
	behindVirtioPCI    map[string]string // device directory under sys → modalias, made when virtio_pci loads
}

func newFakeKernel(t *testing.T) *fakeKernel {
	root := t.TempDir()
	k := &fakeKernel{t: t, dir: filepath.Join(root, "modules"), sys: filepath.Join(root, "sys"), procFile: filepath.Join(root, "modules.proc")}
	k.write(filepath.Join(k.dir, modules.ListName), strings.Join([]string{
		"kernel/virtio.ko", "kernel/virtio_pci.ko", "kernel/virtio_net.ko", "kernel/e1000.ko", "kernel/virtio_blk.ko",
		"kernel/scsi_mod.ko", "kernel/ahci.ko", "kernel/nvme.ko", "kernel/sd_mod.ko", "kernel/libcrc32c.ko", "kernel/xfs.ko",
		"kernel/ext4.ko", "kernel/softdog.ko", "kernel/bridge.ko",
	}, "\n")+"\n")
	k.write(filepath.Join(k.dir, "modules.dep"), "kernel/virtio.ko:\nkernel/virtio_pci.ko: kernel/virtio.ko\n"+
		"kernel/virtio_net.ko: kernel/virtio.ko\nkernel/e1000.ko:\nkernel/virtio_blk.ko: kernel/virtio.ko\nkernel/scsi_mod.ko:\n"+
		"kernel/ahci.ko: kernel/scsi_mod.ko\nkernel/nvme.ko:\nkernel/sd_mod.ko: kernel/scsi_mod.ko\nkernel/libcrc32c.ko:\n"+
		"kernel/xfs.ko: kernel/libcrc32c.ko\nkernel/ext4.ko:\nkernel/softdog.ko:\nkernel/bridge.ko:\n")
	k.write(filepath.Join(k.dir, modules.AliasName), "alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci\n"+
		"alias virtio:d00000001v* virtio_net\nalias virtio:d00000002v* virtio_blk\nalias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000\n"+
		"alias pci:v*d*sv*sd*bc01sc06i01* ahci\nalias pci:v*d*sv*sd*bc01sc08i02* nvme\nalias scsi:t-0x00* sd_mod\n"+
		// Not device aliases: what the kernel's request_module asks for.
		"alias fs-xfs xfs\nalias fs-ext4 ext4\nalias crypto-crc32c crc32c_generic\n")
	// q35: a virtio NIC and disk on PCI, and the AHCI controller, without disks on it.
	k.write(filepath.Join(k.sys, "bus/pci/devices/0000:00:01.0/modalias"), "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00\n")
	k.write(filepath.Join(k.sys, "bus/pci/devices/0000:00:03.0/modalias"), "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00\n")
	k.write(filepath.Join(k.sys, "bus/pci/devices/0000:00:1f.2/modalias"), "pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01\n")
	k.behindVirtioPCI = map[string]string{"bus/virtio/devices/virtio0/modalias": "virtio:d00000001v00001AF4\n",
		"bus/virtio/devices/virtio1/modalias": "virtio:d00000002v00001AF4\n"}
	k.write(k.procFile, "squashfs 73728 1 - Live 0x0\n")
	return k
}

func (k *fakeKernel) write(p, data string) {
	k.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

func (k *fakeKernel) load(path, _ string) error {
	name := strings.TrimSuffix(filepath.Base(path), ".ko")
	k.mu.Lock()
	defer k.mu.Unlock()
	k.loaded = append(k.loaded, name)
	proc, _ := os.ReadFile(k.procFile)
	k.write(k.procFile, string(proc)+name+" 4096 0 - Live 0x0\n")
	if name == "virtio_pci" {
		for p, v := range k.behindVirtioPCI {
			k.write(filepath.Join(k.sys, p), v)
		}
	}
	return nil
}

func (k *fakeKernel) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.loaded
	k.loaded = nil
	return out
}

func TestBootModulesPhases(t *testing.T) {
	k := newFakeKernel(t)
	b := newBootModules(slog.New(slog.NewTextHandler(io.Discard, nil)), modules.Loader{File: k.load}, k.dir, k.sys, k.procFile)
	// As PID 1 does it: the disk controllers from the start, beside the virtio transports.
	b.startDisks()
	b.buses()
	if err := b.waitDisks(context.Background()); err != nil {
		t.Fatal(err)
	}
	// virtio_blk for the disk that appeared behind virtio_pci (so after it), ahci for the SATA controller;
	// no NVMe controller and no SCSI disk: no nvme, no sd_mod.
	got := k.take()
	if slices.Index(got, "virtio_blk") < slices.Index(got, "virtio_pci") {
		t.Errorf("virtio_blk loaded before the transport its disk sits on: %v", got)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"ahci", "scsi_mod", "virtio", "virtio_blk", "virtio_pci"}, got); diff != "" {
		t.Errorf("buses and disks (-want +got):\n%s", diff)
	}
	b.network()
	if diff := cmp.Diff([]string{"virtio_net"}, k.take()); diff != "" {
		t.Errorf("network: no Intel NIC, so no e1000 (-want +got):\n%s", diff)
	}
	if err := b.filesystems(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = b.filesystems(context.Background())
	if diff := cmp.Diff([]string{"libcrc32c", "xfs", "ext4"}, k.take()); diff != "" {
		t.Errorf("filesystems, asked twice (-want +got):\n%s", diff)
	}
	select {
	case <-b.all:
		t.Fatal("all modules reported loaded before the background load")
	default:
	}
	b.modprobeSysctl = filepath.Join(t.TempDir(), "modprobe")
	b.background()
	b.background()
	<-b.all
	// Only now does the kernel ask the image's helper for what it lacks.
	if got, err := os.ReadFile(b.modprobeSysctl); err != nil || string(got) != modload.Helper+"\n" {
		t.Errorf("kernel's modprobe path after the background load = %q, %v; want %s", got, err, modload.Helper)
	}
	// The rest: what no device needed, once each; not the software watchdog, which would take
	// /dev/watchdog before a hardware one.
	if diff := cmp.Diff([]string{"e1000", "nvme", "sd_mod", "bridge"}, k.take()); diff != "" {
		t.Errorf("background (-want +got):\n%s", diff)
	}
	b.softWatchdog()
	if diff := cmp.Diff([]string{"softdog"}, k.take()); diff != "" {
		t.Errorf("software watchdog (-want +got):\n%s", diff)
	}
}

// Without the image's module metadata nothing can be loaded, but nothing waits forever either.
func TestBootModulesWithoutMetadata(t *testing.T) {
	k := newFakeKernel(t)
	b := newBootModules(slog.New(slog.NewTextHandler(io.Discard, nil)), modules.Loader{File: k.load}, t.TempDir(), k.sys, k.procFile)
	b.buses()
	b.startDisks()
	b.network()
	if err := b.waitDisks(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.background()
	<-b.all
	if got := k.take(); len(got) != 0 {
		t.Errorf("loaded %v without a module list", got)
	}
}
