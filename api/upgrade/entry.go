package upgrade

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-os/cairn/api/payload"
)

// The ESP of a disk Cairn boots from (cairn.raw, an installed disk). systemd-boot is the removable-media
// loader; it boots the unified kernel images in EntriesDir, one per slot, and its boot counting is the
// boot-state record: an entry named with "+LEFT[-DONE]" is on trial, and systemd-boot renames it (LEFT-1,
// DONE+1) each time before it boots it. An entry with no tries left is sorted after every other, so the
// node falls back to the other slot by itself; machined marks a trial entry good by renaming it without
// the counter once the node is Running and healthy. A rename is the only write, so the record read back
// after a power cut is the old name or the new one.
//
// Which entry boots is the order systemd-boot sorts them in: entries with tries left first, then by name,
// highest version first (the UKIs carry no os-release ID, which would make systemd-boot sort by their
// VERSION instead). The names are "cairn-GEN-SLOT.efi": the entry with the highest generation boots, and
// every upgrade or rollback names its entry one generation above the rest.
const (
	ESPLabel    = "CAIRN-EFI" // the ESP's GPT partition name
	LoaderPath  = "EFI/BOOT/BOOTX64.EFI"
	LoaderConf  = "loader/loader.conf"
	EntriesDir  = "EFI/Linux"
	entryPrefix = "cairn-"
	entrySuffix = ".efi"
)

// LoaderConfText is loader.conf: boot the first entry at once, no editing of the command line at the
// console (it would bypass the image's), and no entries the image did not put there.
const LoaderConfText = "timeout 0\neditor no\nauto-entries no\nauto-firmware no\n"

// Entry is one slot's boot entry.
type Entry struct {
	Gen  int
	Slot string // payload.SlotA or payload.SlotB
	// Counted entries are on trial: TriesLeft boots remain before systemd-boot gives up on it.
	Counted              bool
	TriesLeft, TriesDone int
}

// FileName is the entry's name in EntriesDir.
func (e Entry) FileName() string {
	s := fmt.Sprintf("%s%d-%s", entryPrefix, e.Gen, strings.ToLower(e.Slot))
	if e.Counted {
		s += "+" + strconv.Itoa(e.TriesLeft)
		if e.TriesDone > 0 {
			s += "-" + strconv.Itoa(e.TriesDone)
		}
	}
	return s + entrySuffix
}

// ID is the name without the counter: what systemd-boot calls the entry (LoaderEntrySelected).
func (e Entry) ID() string {
	e.Counted = false
	return e.FileName()
}

// Bad says systemd-boot has given up on the entry.
func (e Entry) Bad() bool { return e.Counted && e.TriesLeft == 0 }

// ParseEntry reads an entry's file name; ok is false for any other file.
func ParseEntry(name string) (e Entry, ok bool) {
	s, found := strings.CutPrefix(strings.ToLower(name), entryPrefix)
	if !found {
		return e, false
	}
	if s, found = strings.CutSuffix(s, entrySuffix); !found {
		return e, false
	}
	s, counter, counted := strings.Cut(s, "+")
	gen, slot, found := strings.Cut(s, "-")
	if !found {
		return e, false
	}
	var err error
	if e.Gen, err = strconv.Atoi(gen); err != nil || e.Gen < 0 {
		return e, false
	}
	switch slot {
	case "a":
		e.Slot = payload.SlotA
	case "b":
		e.Slot = payload.SlotB
	default:
		return e, false
	}
	if counted {
		e.Counted = true
		left, done, hasDone := strings.Cut(counter, "-")
		if e.TriesLeft, err = strconv.Atoi(left); err != nil || e.TriesLeft < 0 {
			return e, false
		}
		if hasDone {
			if e.TriesDone, err = strconv.Atoi(done); err != nil || e.TriesDone < 0 {
				return e, false
			}
		}
	}
	return e, true
}

// Other is the slot that is not s.
func Other(s string) string {
	if s == payload.SlotA {
		return payload.SlotB
	}
	return payload.SlotA
}
