package upgrade

import "github.com/cairn-os/cairn/api/payload"

// The layout of a disk Cairn boots from, shared by the raw image the builder writes (cairn.raw) and the
// disk a node booted from the ISO installs itself onto: a GPT whose partition 1 is the ESP (ESPLabel),
// from ESPStart, ESPSize of the UKI long, followed by the payload slots A and B
// (api/payload.PartitionLabel), SlotSize each.

const mib = 1 << 20

// ESPStart leaves the first MiB for the protective MBR and the GPT, aligned like every partitioning
// tool does.
const ESPStart = 1 * mib

// SlotSize is each payload slot's partition: fixed, so an upgrade's payload fits the layout the disk
// was installed with (the payload is 78 MiB today).
const SlotSize = 512 * mib

// ESPSize gives the EFI system partition room for three UKIs during an upgrade: the running slot's
// entry, the other slot's, and the new one being written before the old one it replaces is removed.
// The 32 MiB on top hold systemd-boot and FAT's own structures; FAT32's minimum is 64 MiB.
func ESPSize(uki int64) int64 {
	s := 3*uki + 32*mib
	s = (s + 16*mib - 1) / (16 * mib) * (16 * mib)
	return max(s, 64*mib)
}

// FirstEntry is the boot entry of a new disk, cairn.raw's or one Cairn installed itself onto: generation 1,
// slot A, good (not on trial).
var FirstEntry = Entry{Gen: 1, Slot: payload.SlotA}
