package main

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-os/cairn/internal/modload"
	"github.com/cairn-os/cairn/machined/internal/modules"
	"github.com/cairn-os/cairn/machined/internal/sys"
)

// bootModules loads the image's kernel modules in the order a node's boot needs them. Under emulation
// each module costs tens to hundreds of milliseconds, and on one CPU nothing else runs meanwhile, so
// before the API answers only what this machine's hardware needs is loaded:
//
//  0. QEMU's fw_cfg, whose per-node arguments complete the command line the modules' parameters come
//     from (firmwareConfig);
//  1. the virtio transports and the NICs present, before the network is configured (buses, network);
//  2. the disk controllers present, from the start and while the network comes up (startDisks): every
//     disk must be visible before the node looks for its STATE disk;
//  3. the filesystems, when STATE is found (a configured node mounts it to read its lock) or when
//     Init or Join first mounts a volume; a fresh node needs none to know it is fresh;
//  4. everything else of the image's list, once the node has read its lock (background), on a thread
//     at the lowest priority so the API's first answers do not wait for it, raised to the normal one
//     when a mount waits for the filesystems; the workload waits for all of it (all);
//  5. then the kernel's own requests (a network add-on's tunnel, ipset or classifier): they go to the
//     image's helper (modload.Helper) from then on.
type bootModules struct {
	log         *slog.Logger
	loader      modules.Loader
	dir         string         // /lib/modules/RELEASE
	sysRoot     string         // /sys
	procModules string         // /proc/modules
	index       *modules.Index // nil if the image's module metadata could not be read

	busesUp chan struct{} // closed once the virtio transports are loaded
	disks   chan struct{} // closed once the disk controllers' drivers are loaded
	fs      func()        // loads the filesystems once; concurrent callers wait for the first
	all     chan struct{} // closed once every module of the image is loaded (or failed)
	bg      sync.Once
	bgTID   atomic.Int64 // the background thread while it loads at low priority, 0 otherwise
	urgent  atomic.Bool  // a mount asked for the filesystems: the background loads at normal priority

	// modprobeSysctl is the kernel's modprobe path (/proc/sys/kernel/modprobe), where the background
	// load writes modload.Helper once it is done; "" leaves it alone (sandbox mode, tests).
	modprobeSysctl string
}

// newBootModules reads the module metadata of the image in dir (/lib/modules/RELEASE); sysRoot and
// procModules are where the kernel lists devices and loaded modules (/sys, /proc/modules).
func newBootModules(log *slog.Logger, l modules.Loader, dir, sysRoot, procModules string) *bootModules {
	b := &bootModules{log: log, loader: l, dir: dir, sysRoot: sysRoot, procModules: procModules,
		busesUp: make(chan struct{}), disks: make(chan struct{}), all: make(chan struct{})}
	x, err := modules.ReadIndex(b.dir)
	if err != nil {
		log.Error("kernel modules: the image's module list cannot be read; no module will be loaded", "error", err)
	}
	b.index = x
	// Filesystems are no device's driver (their aliases are "fs-xfs", not a device's): all of them load.
	b.fs = sync.OnceFunc(func() { b.load("filesystems", func() []string { return modules.Filesystems }) })
	return b
}

// present loads the candidates that a device on the machine needs now, with their dependencies.
func (b *bootModules) present(set string, candidates []string) {
	b.load(set, func() []string {
		return b.index.Aliases.Present(candidates, modules.DeviceAliases(b.sysRoot, b.index.Aliases.Buses(candidates)))
	})
}

// load loads the named modules with their dependencies; names is called only when there is an index.
func (b *bootModules) load(set string, names func() []string) {
	if b.index == nil {
		return
	}
	b.loadFiles(set, b.index.Files(names(), b.loaded()))
}

// loadFiles loads module files in order and logs the set: what it loaded, left out and failed to load.
func (b *bootModules) loadFiles(set string, files []string) {
	start := time.Now()
	n, left, err := b.loader.LoadFiles(b.dir, files)
	for _, m := range left {
		b.log.Info("module left out: modprobe.blacklist on the command line names it", "module", m)
	}
	if err != nil {
		b.log.Warn("modules", "set", set, "error", err)
	}
	b.log.Info("modules loaded", "set", set, "count", n, "took", time.Since(start).Round(time.Millisecond))
}

// loaded lists the modules the kernel has, so their files are not read again: the kernel reads and
// hashes a whole module before it finds out it has it already.
func (b *bootModules) loaded() []string {
	list, _ := os.ReadFile(b.procModules)
	return modules.Loaded(list)
}

// buses loads the virtio transports present: the NICs and disks behind them appear only then.
func (b *bootModules) buses() {
	defer close(b.busesUp)
	b.present("buses", modules.Buses)
}

// network loads the NIC drivers present.
func (b *bootModules) network() { b.present("network", modules.Network) }

// firmwareConfig loads QEMU's fw_cfg driver, on a machine that has one.
func (b *bootModules) firmwareConfig() { b.present("firmware config", modules.FirmwareConfig) }

// startDisks loads the disk controllers' drivers in the background, while the virtio transports and
// the NICs load and the network comes up: a controller's driver spends part of its load waiting for
// its links (SATA ports are debounced for a tenth of a second and more), which the rest of the boot can
// use. The drivers of disks behind virtio are matched again once the transports are loaded (buses),
// and SCSI-like disks (SATA, virtio-scsi), found by their controllers' drivers, after those.
func (b *bootModules) startDisks() {
	go func() {
		defer close(b.disks)
		b.present("disk controllers", modules.Disks)
		<-b.busesUp
		b.present("disks", modules.Disks)
		b.present("disk types", modules.DiskTypes)
	}()
}

// waitDisks returns once every disk controller's driver is loaded.
func (b *bootModules) waitDisks(ctx context.Context) error {
	select {
	case <-b.disks:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// filesystems loads the filesystem modules unless that is done; it returns once they are loaded. When
// the background thread is at it, it gets the normal priority back: a mount waits for it now.
func (b *bootModules) filesystems(context.Context) error {
	b.urgent.Store(true)
	b.hurry()
	b.fs()
	return nil
}

// hurry gives the background thread the normal priority back, if it runs at the low one.
func (b *bootModules) hurry() {
	if tid := b.bgTID.Swap(0); tid != 0 {
		if err := sys.Hurry(int(tid)); err != nil {
			b.log.Warn("modules: raise the loading thread's priority", "error", err)
		}
	}
}

// background loads the filesystems and the rest of the image's modules (netfilter, bridge, overlay, the
// drivers of hardware not present) on a thread of the lowest priority, then closes all. It is called once
// the node has read its lock; further calls do nothing.
func (b *bootModules) background() {
	b.bg.Do(func() {
		go func() {
			defer close(b.all)
			// A node that mounted STATE to read its lock, or whose Init already mounts, needs the rest
			// soon: only a node waiting in maintenance loads it at low priority.
			if !b.urgent.Load() {
				tid, err := sys.BackgroundThread()
				if err != nil {
					b.log.Warn("modules: lower the loading thread's priority", "error", err)
				}
				b.bgTID.Store(int64(tid))
				defer b.bgTID.Store(0)
				if b.urgent.Load() { // a mount came meanwhile and may have missed the thread
					b.hurry()
				}
			}
			b.fs()
			if b.index == nil {
				return
			}
			b.loadFiles("remaining", b.index.Rest(b.loaded()))
			b.answerRequests()
		}()
	})
}

// answerRequests points the kernel's module requests at modload.Helper.
func (b *bootModules) answerRequests() {
	if b.modprobeSysctl == "" {
		return
	}
	if err := os.WriteFile(b.modprobeSysctl, []byte(modload.Helper+"\n"), 0o644); err != nil {
		b.log.Warn("modules: the kernel's module requests stay unanswered", "error", err)
	}
}

// softWatchdog loads the kernel's software watchdog; the hardware watchdog's code calls it when the
// machine has no hardware one once every other module is loaded.
func (b *bootModules) softWatchdog() {
	b.load("software watchdog", func() []string { return []string{modules.SoftWatchdog} })
}
