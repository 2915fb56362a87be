package slots

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/pe"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/upgrade"
	"github.com/cairn-os/cairn/machined/internal/disk/inventory"
)

// ErrNoSlots is returned on a node that did not boot from a disk with slots (the ISO, vmlinux mode).
var ErrNoSlots = errors.New("this node did not boot from a disk with A/B slots (cairn.raw or an installed disk)")

// Mounter mounts and unmounts (sys.Mounter).
type Mounter interface {
	Mount(source, target, fstype string, flags uintptr, data string) error
	Unmount(target string, detach bool) error
}

// Mount flags, as data here so the package stays free of syscalls (linux values).
const (
	msRDOnly = 0x1
	msNoSUID = 0x2
	msNoDev  = 0x4
	msNoExec = 0x8
)

// espModules are what mounting the ESP takes.
var espModules = []string{"vfat", "nls_cp437", "nls_iso8859_1"}

// Manager reads and changes the slots of the disk the node booted from.
type Manager struct {
	// Disks lists the node's block devices (inventory.Scanner.Scan).
	Disks   func(context.Context) ([]inventory.Disk, error)
	Mounter Mounter
	// ESPDir is where the ESP is mounted while it is read or changed (it is not mounted otherwise: a
	// FAT filesystem mounted across a power cut is left dirty).
	ESPDir string
	// EFIVars is where efivarfs is mounted (LoaderEntrySelected); MountEFIVars mounts it there if it is
	// not yet (nil: nothing to do).
	EFIVars      string
	MountEFIVars func()
	// Mounts returns /proc/self/mounts: a slot's partition that is mounted is never written.
	Mounts func() ([]byte, error)
	// LoadModules loads kernel modules before they are needed (the ESP's filesystem and code pages: the
	// node has no modprobe for the kernel to ask); nil when they are built in.
	LoadModules func(names ...string)
	Log         *slog.Logger

	mu sync.Mutex // one change of the ESP at a time
}

// Slot is what Info reports of one slot.
type Slot struct {
	Name    string // A or B
	Version string // from its unified kernel image's os-release
	Gen     int
	Booted  bool // this boot started from it
	Next    bool // the next boot starts from it
	// State: good (confirmed), trial (booted once to be confirmed), failed (its trial boot did not
	// confirm: systemd-boot passes it over), empty.
	State string
}

// Booted is the entry this boot started from.
func (m *Manager) Booted() (upgrade.Entry, error) {
	if m.MountEFIVars != nil {
		m.MountEFIVars()
	}
	e, err := Booted(m.EFIVars)
	if err != nil {
		return e, fmt.Errorf("%w: %w", ErrNoSlots, err)
	}
	return e, nil
}

// withESP mounts the ESP (read-only unless rw), runs fn on it and unmounts it.
func (m *Manager) withESP(ctx context.Context, rw bool, fn func(osFS) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	part, err := m.partition(ctx, upgrade.ESPLabel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(m.ESPDir, 0o700); err != nil {
		return err
	}
	flags := uintptr(msNoSUID | msNoDev | msNoExec)
	if !rw {
		flags |= msRDOnly
	}
	if m.LoadModules != nil {
		m.LoadModules(espModules...)
	}
	// The code page and character set are named, so the mount needs only the modules loaded above
	// (the kernel's defaults name others); Cairn's names on the ESP are ASCII.
	if err := m.Mounter.Mount(part.Path, m.ESPDir, "vfat", flags, "umask=0077,codepage=437,iocharset=iso8859-1"); err != nil {
		return fmt.Errorf("mount the ESP %s: %w", part.Path, err)
	}
	ferr := fn(osFS{m.ESPDir})
	if err := m.Mounter.Unmount(m.ESPDir, false); err != nil && ferr == nil {
		ferr = fmt.Errorf("unmount the ESP %s: %w", part.Path, err)
	}
	return ferr
}

// partition finds the partition named label on the node's disks.
func (m *Manager) partition(ctx context.Context, label string) (inventory.Partition, error) {
	disks, err := m.Disks(ctx)
	if err != nil {
		return inventory.Partition{}, err
	}
	for _, d := range disks {
		for _, p := range d.Partitions {
			if p.Label == label && p.Path != "" {
				return p, nil
			}
		}
	}
	return inventory.Partition{}, fmt.Errorf("%w: no partition is named %s", ErrNoSlots, label)
}

// Info reports both slots.
func (m *Manager) Info(ctx context.Context) ([]Slot, error) {
	booted, err := m.Booted()
	if err != nil {
		return nil, err
	}
	out := []Slot{{Name: payload.SlotA, State: "empty"}, {Name: payload.SlotB, State: "empty"}}
	err = m.withESP(ctx, false, func(esp osFS) error {
		es, err := Entries(esp)
		if err != nil {
			return err
		}
		for i, e := range es {
			s := &out[0]
			if e.Slot == payload.SlotB {
				s = &out[1]
			}
			s.Gen, s.Next, s.Booted = e.Gen, i == 0, e.Slot == booted.Slot
			switch {
			case e.Bad():
				s.State = "failed"
			case e.Counted:
				s.State = "trial"
			default:
				s.State = "good"
			}
			if s.Version, err = UKIVersion(esp.path(entryPath(e))); err != nil {
				s.Version = "unknown: " + err.Error()
			}
		}
		return nil
	})
	return out, err
}

// UKIVersion reads VERSION from a unified kernel image's .osrel section.
func UKIVersion(p string) (string, error) {
	f, err := pe.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := f.Section(".osrel")
	if s == nil {
		return "", fmt.Errorf("%s has no .osrel section", filepath.Base(p))
	}
	b, err := s.Data()
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(strings.TrimRight(string(b), "\x00")))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VERSION="); ok {
			return strings.Trim(v, `"`), nil
		}
	}
	return "", fmt.Errorf("%s's os-release has no VERSION", filepath.Base(p))
}

// Write writes a bundle's payload and boot entry into the slot that did not boot: first the slot's old
// entry goes, then its payload partition is written and read back, last the new entry is put in place to
// boot once. progress is told what happens. The bundle's manifest has been read and checked by the caller.
func (m *Manager) Write(ctx context.Context, br *upgrade.Reader, progress func(string)) (upgrade.Entry, error) {
	booted, err := m.Booted()
	if err != nil {
		return upgrade.Entry{}, err
	}
	slot := upgrade.Other(booted.Slot)
	part, err := m.partition(ctx, payload.PartitionLabel(slot))
	if err != nil {
		return upgrade.Entry{}, err
	}
	man := br.Manifest
	if uint64(man.Payload.Size) > part.Size {
		return upgrade.Entry{}, fmt.Errorf("the payload is %d bytes, more than slot %s's partition %s (%d bytes)", man.Payload.Size, slot, part.Path, part.Size)
	}
	if err := m.notMounted(part.Path); err != nil {
		return upgrade.Entry{}, err
	}
	if err := m.withESP(ctx, true, func(esp osFS) error {
		if err := Clean(esp); err != nil {
			return err
		}
		return Retire(esp, slot)
	}); err != nil {
		return upgrade.Entry{}, err
	}
	pr, err := br.Next(upgrade.PayloadName, man.Payload)
	if err != nil {
		return upgrade.Entry{}, err
	}
	progress(fmt.Sprintf("writing the payload (%d MiB) to slot %s (%s)", man.Payload.Size>>20, slot, part.Path))
	if err := WriteDevice(ctx, part.Path, pr, man.Payload, progress); err != nil {
		return upgrade.Entry{}, fmt.Errorf("slot %s's payload partition %s: %w", slot, part.Path, err)
	}
	ur, err := br.Next(upgrade.UKIName, man.UKI)
	if err != nil {
		return upgrade.Entry{}, err
	}
	progress(fmt.Sprintf("writing the boot entry (%d MiB) of slot %s", man.UKI.Size>>20, slot))
	var next upgrade.Entry
	err = m.withESP(ctx, true, func(esp osFS) error {
		next, err = Stage(esp, slot, ur)
		return err
	})
	return next, err
}

// notMounted refuses a device that is mounted.
func (m *Manager) notMounted(dev string) error {
	b, err := m.Mounts()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == dev {
			return fmt.Errorf("%s is mounted on %s: it is not the slot to write", dev, f[1])
		}
	}
	return nil
}

// WriteDevice copies r (which checks its own SHA-256 at its end) to the start of dev, syncs, then reads the
// written bytes back and checks them against want.
func WriteDevice(ctx context.Context, dev string, r io.Reader, want payload.Sum, progress func(string)) error {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	pw := &progressWriter{w: f, total: want.Size, progress: progress, ctx: ctx}
	if _, err := io.Copy(pw, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	rf, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer rf.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, rf, want.Size); err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want.SHA256 {
		return fmt.Errorf("read back: SHA-256 %s, wrote %s", got, want.SHA256)
	}
	return nil
}

// progressWriter reports every tenth of the way, and stops when ctx ends.
type progressWriter struct {
	w        io.Writer
	n, total int64
	told     int64
	progress func(string)
	ctx      context.Context
}

func (p *progressWriter) Write(b []byte) (int, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := p.w.Write(b)
	p.n += int64(n)
	if tenth := p.n * 10 / max(p.total, 1); tenth > p.told && p.n < p.total {
		p.told = tenth
		p.progress(fmt.Sprintf("%d of %d MiB written", p.n>>20, p.total>>20))
	}
	return n, err
}

// Confirm marks the booted entry good, if it is on trial.
func (m *Manager) Confirm(ctx context.Context) (upgrade.Entry, error) {
	booted, err := m.Booted()
	if err != nil {
		return booted, err
	}
	var good upgrade.Entry
	err = m.withESP(ctx, true, func(esp osFS) error {
		good, err = MarkGood(esp, booted)
		return err
	})
	return good, err
}

// CheckRollback says whether a rollback has a slot to go to, changing nothing.
func (m *Manager) CheckRollback(ctx context.Context) error {
	booted, err := m.Booted()
	if err != nil {
		return err
	}
	return m.withESP(ctx, false, func(esp osFS) error {
		_, err := rollbackTarget(esp, booted.Slot)
		return err
	})
}

// Rollback makes the other slot boot next.
func (m *Manager) Rollback(ctx context.Context) (upgrade.Entry, error) {
	booted, err := m.Booted()
	if err != nil {
		return booted, err
	}
	var next upgrade.Entry
	err = m.withESP(ctx, true, func(esp osFS) error {
		next, err = Rollback(esp, booted.Slot)
		return err
	})
	return next, err
}
