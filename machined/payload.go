package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/machined/internal/bootmedium"
	"github.com/cairn-os/cairn/machined/internal/disk/apply"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
	"github.com/cairn-os/cairn/machined/internal/events"
	"github.com/cairn-os/cairn/machined/internal/fsm"
	"github.com/cairn-os/cairn/machined/internal/modules"
	"github.com/cairn-os/cairn/machined/internal/proc"
	"github.com/cairn-os/cairn/machined/internal/sys"
	"github.com/cairn-os/cairn/machined/internal/verity"
	"github.com/cairn-os/cairn/machined/internal/workload"
)

// mediumDir is where an ISO boot medium is mounted when the payload comes from it.
const mediumDir = "/run/cairn/medium"

// payloadSource finds the node's payload on the boot medium and mounts it read-only on
// payload.MountPoint through dm-verity, checked against the root hash the root image records. The root
// image came with the kernel the boot loader loaded, so the payload mounted is exactly the one built
// with this machined.
//
// The search starts as soon as the node is up (early), on a thread of the lowest priority: a missing or
// wrong medium is in the log before anyone asks for Init, and Init finds the payload mounted. The
// workload's mount waits for that search, at normal priority, or searches itself.
type payloadSource struct {
	finder bootmedium.Finder
	// unpacker unpacks the ISO's stream onto EPHEMERAL: given to every search but the early one, which
	// runs before the volumes are mounted.
	unpacker bootmedium.DirUnpacker
	sumFile  string // payload.SumFile
	log      *slog.Logger

	once sync.Once
	done chan struct{} // closed when the early search has ended; err is its result
	err  error

	mu      sync.Mutex
	bus     *events.Bus        // where the unpacking's progress is published, once the node has one
	seq     func() string      // the sequence running, whose followers (cairnctl init) see that progress
	tid     int                // the early search's thread while it runs at low priority, 0 otherwise
	hurry   bool               // someone waits for the early search: it runs at normal priority
	mounted bootmedium.Mounted // what the last search that succeeded mounted
}

func newPayloadSource(scanner inventory.Scanner, load func(names ...string), starter proc.Starter, log *slog.Logger) *payloadSource {
	v := verity.Devices{Runner: apply.ExecRunner{Starter: starter}, MapperDir: "/dev/mapper",
		Prepare: func(context.Context) error {
			load(modules.Verity...)
			// veritysetup's lock directory; it warns on every call without it.
			return os.MkdirAll("/run/cryptsetup", 0o700)
		}}
	p := &payloadSource{log: log, done: make(chan struct{}), sumFile: payload.SumFile,
		finder: bootmedium.Finder{Disks: scanner.Scan, Opener: inventory.OSOpener{}, Mounter: sys.Mounter{}, Verity: v,
			AttachLoop: sys.AttachLoop, DetachLoop: sys.DetachLoop, LoadModules: load, MediumDir: mediumDir, Wait: 20 * time.Second, Log: log}}
	helper := apply.ExecRunner{Starter: starter}
	p.unpacker = bootmedium.DirUnpacker{Dir: payload.UnpackDir, Opener: inventory.OSOpener{}, Log: log, Format: v.Format,
		Free: func(dir string) (int64, error) {
			u, err := sys.Statfs(dir)
			return int64(u.Size - u.Used), err
		},
		Decode: func(ctx context.Context, src, dst string) error {
			_, err := helper.Run(ctx, payload.UnpackHelper, src, dst)
			return err
		},
		Progress: func(outcome, msg string) {
			p.mu.Lock()
			bus, seq := p.bus, p.seq
			p.mu.Unlock()
			if bus != nil {
				bus.Publish(events.Event{Kind: events.KindPayload, Sequence: seq(), Outcome: outcome, Message: msg})
			}
		}}
	return p
}

// publishTo makes the unpacking's progress events of bus, in the sequence seq says is running.
func (p *payloadSource) publishTo(bus *events.Bus, seq func() string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bus, p.seq = bus, seq
}

// early starts the search once the disk controllers' drivers are loaded (disks), not every module: the
// search then runs while the rest load. A medium whose driver is among the rest (a USB stick) is found by
// the workload's own search, which runs once every module is loaded. log is machined's log, which
// `cairnctl logs machined` shows. A configured node needs its payload at once (urgent): its search runs
// at normal priority from the start.
func (p *payloadSource) early(modules <-chan struct{}, log *slog.Logger, urgent bool) {
	p.once.Do(func() {
		p.log, p.finder.Log, p.unpacker.Log = log, log, log
		if urgent {
			p.hurryNow()
		}
		go func() {
			defer close(p.done)
			<-modules
			p.mu.Lock()
			if !p.hurry {
				tid, err := sys.BackgroundThread()
				if err != nil {
					p.log.Warn("payload: lower the search's priority", "error", err)
				}
				p.tid = tid
			}
			p.mu.Unlock()
			p.err = p.mount(context.Background(), false)
			switch {
			case errors.Is(p.err, bootmedium.ErrUnpackLater): // the search's "payload found" line says so
			case errors.Is(p.err, bootmedium.ErrNoPayload):
				p.log.Info("payload", "note", p.err)
			case p.err != nil:
				p.log.Warn("payload: not found yet; Init, Join or the start looks again once every driver is loaded", "error", p.err)
			}
			p.mu.Lock()
			p.tid = 0
			p.mu.Unlock()
		}()
	})
}

// mount searches for the payload and mounts it; unpack gives the search the unpacker (the volumes are
// mounted).
func (p *payloadSource) mount(ctx context.Context, unpack bool) error {
	want, err := bootmedium.ReadRecords(p.sumFile)
	if err != nil {
		return err
	}
	f := p.finder
	if unpack {
		f.Unpacker = p.unpacker
	}
	m, err := f.Mount(ctx, want, payload.MountPoint)
	if err == nil {
		p.mu.Lock()
		p.mounted = m
		p.mu.Unlock()
	}
	return err
}

// unpacked is the file the payload was unpacked into and is mounted from, "" when it is mounted from the
// medium itself.
func (p *payloadSource) unpacked() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mounted.Unpacked
}

// release lets go of a payload unpacked onto EPHEMERAL before the volumes unmount (bootmedium's Release).
// What stays busy is detached, and the volumes' own unmount detaches what still holds them, so a failure
// here is logged and never stops a reboot.
func (p *payloadSource) release(ctx context.Context) error {
	p.mu.Lock()
	m := p.mounted
	if m.Unpacked != "" {
		p.mounted = bootmedium.Mounted{} // a later Mount (a stop sequence that failed) searches again
	}
	p.mu.Unlock()
	if err := p.finder.Release(ctx, m, payload.MountPoint); err != nil {
		p.log.Warn("payload: not released before the volumes unmount", "error", err)
	}
	return nil
}

// hurryNow gives the search the normal priority: Init or Join has begun, or the workload waits for it.
func (p *payloadSource) hurryNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hurry = true
	if p.tid != 0 {
		if err := sys.Hurry(p.tid); err != nil {
			p.log.Warn("payload: raise the search's priority", "error", err)
		}
		p.tid = 0
	}
}

// hurryOnSequence raises the search's priority when Init or Join begins: the disks are formatted
// first, and the search can be done by the time the workload needs the payload.
func (p *payloadSource) hurryOnSequence(bus *events.Bus) {
	_, ch, cancel := bus.Subscribe(0)
	defer func() { cancel() }()
	for {
		select {
		case <-p.done:
			return
		case e, ok := <-ch:
			if !ok { // dropped as a slow reader: subscribe again
				_, ch, cancel = bus.Subscribe(0)
				continue
			}
			if e.Kind == events.KindTransition && (e.State == string(fsm.Init) || e.State == string(fsm.Join)) {
				p.hurryNow()
				return
			}
		}
	}
}

// Payload is the workload's view: its Mount takes the early search's result, or searches again when
// that search failed (a medium may have appeared since) or never started.
func (p *payloadSource) Payload() workload.Payload {
	return workload.Payload{Dir: payload.MountPoint, Mount: func(ctx context.Context) error {
		p.mu.Lock()
		mounted := p.mounted.What != ""
		p.mu.Unlock()
		if mounted { // by Init, Join or the start, then asked again by an install
			return nil
		}
		started := true
		p.once.Do(func() { started = false; close(p.done) })
		if !started {
			return p.mount(ctx, true)
		}
		p.hurryNow()
		select {
		case <-p.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.err != nil {
			return p.mount(ctx, true)
		}
		return nil
	}, Release: p.release, Unpacked: p.unpacked}
}
