// Package slots keeps the node's two boot slots (A and B): what each holds, which one boots next, and the
// changes an upgrade or a rollback makes. A slot is a boot entry on the ESP (a unified kernel image that
// systemd-boot starts, api/upgrade's Entry) and a payload partition (api/payload.PartitionLabel).
//
// The boot-state record is the entries' file names, which systemd-boot reads and rewrites with its boot
// counting: see api/upgrade. Every change here is a sequence of steps after each of which a power cut
// leaves a disk that boots the old slot or the new one, never neither (esp_test.go cuts at every step).
package slots

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-os/cairn/api/upgrade"
)

// stagingName is where a new entry is written before it is renamed into EntriesDir: outside it, so
// systemd-boot never sees a partial image.
const stagingName = "EFI/cairn-staging.tmp"

// fileSystem is what the ESP's changes need; the tests cut power between any two calls.
type fileSystem interface {
	ReadDir(dir string) ([]fs.DirEntry, error)
	Create(name string) (io.WriteCloser, error) // the writer's Close syncs before it closes
	Rename(from, to string) error
	Remove(name string) error
	SyncDir(dir string) error
}

// osFS is the ESP mounted at a directory.
type osFS struct{ root string }

func (o osFS) path(name string) string                   { return filepath.Join(o.root, filepath.FromSlash(name)) }
func (o osFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(o.path(dir)) }
func (o osFS) Rename(from, to string) error              { return os.Rename(o.path(from), o.path(to)) }
func (o osFS) Remove(name string) error                  { return os.Remove(o.path(name)) }
func (o osFS) Create(name string) (io.WriteCloser, error) {
	f, err := os.Create(o.path(name))
	if err != nil {
		return nil, err
	}
	return syncCloser{f}, nil
}
func (o osFS) SyncDir(dir string) error {
	d, err := os.Open(o.path(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type syncCloser struct{ *os.File }

func (s syncCloser) Close() error {
	if err := s.File.Sync(); err != nil {
		s.File.Close()
		return err
	}
	return s.File.Close()
}

// Entries lists the boot entries on the ESP, in the order systemd-boot sorts them: the first is the one
// that boots next.
func Entries(fsys fileSystem) ([]upgrade.Entry, error) {
	des, err := fsys.ReadDir(upgrade.EntriesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the boot entries: %w", err)
	}
	var es []upgrade.Entry
	for _, de := range des {
		if e, ok := upgrade.ParseEntry(de.Name()); ok && de.Type().IsRegular() {
			es = append(es, e)
		}
	}
	slices.SortStableFunc(es, bootOrder)
	return es, nil
}

// bootOrder is systemd-boot's: entries it has given up on last, then the highest generation first.
func bootOrder(a, b upgrade.Entry) int {
	if c := cmp.Compare(boolInt(a.Bad()), boolInt(b.Bad())); c != 0 {
		return c
	}
	return cmp.Compare(b.Gen, a.Gen)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func maxGen(es []upgrade.Entry) int {
	g := 0
	for _, e := range es {
		g = max(g, e.Gen)
	}
	return g
}

// Stage writes a new entry for slot from uki: it boots next, once (one try); the other slot's entry stays,
// so the node falls back to it when that boot does not confirm itself. The slot's previous entry is
// removed. uki must fail at its end when its bytes are not the expected ones: nothing is renamed then.
func Stage(fsys fileSystem, slot string, uki io.Reader) (upgrade.Entry, error) {
	es, err := Entries(fsys)
	if err != nil {
		return upgrade.Entry{}, err
	}
	w, err := fsys.Create(stagingName)
	if err != nil {
		return upgrade.Entry{}, fmt.Errorf("write the new boot entry: %w", err)
	}
	if _, err := io.Copy(w, uki); err != nil {
		w.Close()
		fsys.Remove(stagingName)
		return upgrade.Entry{}, err
	}
	if err := w.Close(); err != nil {
		fsys.Remove(stagingName)
		return upgrade.Entry{}, fmt.Errorf("write the new boot entry: %w", err)
	}
	if err := removeSlot(fsys, es, slot); err != nil {
		return upgrade.Entry{}, err
	}
	next := upgrade.Entry{Gen: maxGen(es) + 1, Slot: slot, Counted: true, TriesLeft: 1}
	if err := fsys.Rename(stagingName, entryPath(next)); err != nil {
		return upgrade.Entry{}, fmt.Errorf("put the new boot entry in place: %w", err)
	}
	return next, fsys.SyncDir(upgrade.EntriesDir)
}

// Retire removes slot's entry before its payload partition is overwritten, so no entry ever points at a
// half-written payload (and a rollback cannot choose it).
func Retire(fsys fileSystem, slot string) error {
	es, err := Entries(fsys)
	if err != nil {
		return err
	}
	if err := removeSlot(fsys, es, slot); err != nil {
		return err
	}
	return fsys.SyncDir(upgrade.EntriesDir)
}

// removeSlot removes slot's entries among es.
func removeSlot(fsys fileSystem, es []upgrade.Entry, slot string) error {
	for _, e := range es {
		if e.Slot == slot {
			if err := fsys.Remove(entryPath(e)); err != nil {
				return fmt.Errorf("remove slot %s's entry %s: %w", slot, e.FileName(), err)
			}
		}
	}
	return nil
}

// MarkGood ends booted's trial: its entry loses the counter, so it boots from now on. A no-op for an
// entry that is not on trial.
func MarkGood(fsys fileSystem, booted upgrade.Entry) (upgrade.Entry, error) {
	e, err := find(fsys, booted.Slot)
	if err != nil {
		return e, err
	}
	if !e.Counted {
		return e, nil
	}
	good := upgrade.Entry{Gen: e.Gen, Slot: e.Slot}
	if err := fsys.Rename(entryPath(e), entryPath(good)); err != nil {
		return e, fmt.Errorf("mark %s good: %w", e.FileName(), err)
	}
	return good, fsys.SyncDir(upgrade.EntriesDir)
}

// Rollback makes the slot other than booted boot next, for good: its entry is renamed one generation
// above the rest. An entry systemd-boot gave up on, or one never confirmed, is refused: it did not run.
func Rollback(fsys fileSystem, booted string) (upgrade.Entry, error) {
	es, err := Entries(fsys)
	if err != nil {
		return upgrade.Entry{}, err
	}
	e, err := rollbackTarget(fsys, booted)
	if err != nil {
		return e, err
	}
	next := upgrade.Entry{Gen: maxGen(es) + 1, Slot: e.Slot}
	if err := fsys.Rename(entryPath(e), entryPath(next)); err != nil {
		return e, fmt.Errorf("make slot %s boot next: %w", e.Slot, err)
	}
	return next, fsys.SyncDir(upgrade.EntriesDir)
}

// rollbackTarget is the entry a rollback from booted would boot: the other slot's, which must have
// confirmed a boot.
func rollbackTarget(fsys fileSystem, booted string) (upgrade.Entry, error) {
	other := upgrade.Other(booted)
	e, err := find(fsys, other)
	if err != nil {
		return e, fmt.Errorf("nothing to roll back to: %w", err)
	}
	if e.Counted {
		return e, fmt.Errorf("slot %s (%s) never confirmed a boot: nothing to roll back to", other, e.FileName())
	}
	return e, nil
}

// Clean removes what an interrupted Stage left behind.
func Clean(fsys fileSystem) error {
	if err := fsys.Remove(stagingName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func find(fsys fileSystem, slot string) (upgrade.Entry, error) {
	es, err := Entries(fsys)
	if err != nil {
		return upgrade.Entry{}, err
	}
	for _, e := range es {
		if e.Slot == slot {
			return e, nil
		}
	}
	return upgrade.Entry{}, fmt.Errorf("slot %s has no boot entry in %s", slot, upgrade.EntriesDir)
}

func entryPath(e upgrade.Entry) string { return upgrade.EntriesDir + "/" + e.FileName() }

// Booted reads which entry systemd-boot started, from its LoaderEntrySelected EFI variable (efivarfs'
// format: four bytes of attributes, then a NUL-terminated UTF-16LE string).
func Booted(efivars string) (upgrade.Entry, error) {
	const name = "LoaderEntrySelected-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
	b, err := os.ReadFile(filepath.Join(efivars, name))
	if err != nil {
		return upgrade.Entry{}, fmt.Errorf("which boot entry started is unknown (not booted by systemd-boot): %w", err)
	}
	if len(b) < 4 {
		return upgrade.Entry{}, fmt.Errorf("%s: %d bytes", name, len(b))
	}
	var sb strings.Builder
	for i := 4; i+1 < len(b); i += 2 {
		c := rune(b[i]) | rune(b[i+1])<<8
		if c == 0 {
			break
		}
		sb.WriteRune(c)
	}
	e, ok := upgrade.ParseEntry(sb.String())
	if !ok {
		return upgrade.Entry{}, fmt.Errorf("the boot entry that started, %q, is not a Cairn slot", sb.String())
	}
	return e, nil
}
