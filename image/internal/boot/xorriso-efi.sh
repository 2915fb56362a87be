#!/bin/sh
# The xorriso that grub-mkrescue runs for Cairn's ISO (iso.go passes it as --xorriso). grub-mkrescue
# 2.06 lays out GRUB in a directory of its own and puts the UEFI boot loader there in efi.img, a FAT
# image of a 2.88 MB floppy's size, whatever it holds: the loader is about 0.2 MB, so the ISO carried
# 2.6 MiB of zeros. This remakes efi.img with the same files and 64 KiB to spare, then runs xorriso
# with grub-mkrescue's arguments unchanged: the El Torito entry and the GPT partition that point
# at efi.img are sized from the file when xorriso writes them.
#
# grub-mkrescue also runs `xorriso -as mkisofs -help` to learn its options; without `-r DIR` (GRUB's
# directory) this only runs xorriso.
set -eu
dir= prev=
for a do
	[ "$prev" = -r ] && dir=$a
	prev=$a
done
img=$dir/efi.img
if [ -n "$dir" ] && [ -f "$img" ]; then
	# Work outside GRUB's directory: everything in it goes into the ISO.
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mcopy -s -m -n -i "$img" ::/ "$tmp/"
	size=$(du -s -B1 --apparent-size "$tmp" | cut -f1)
	rm -f "$img"
	# Sectors of 512 bytes: the files, and 64 KiB for FAT's tables, directories and rounding to clusters.
	mformat -C -T $(((size + 65536 + 511) / 512)) -i "$img" ::
	for f in "$tmp"/*; do
		mcopy -s -m -i "$img" "$f" ::/
	done
	rm -rf "$tmp"
	trap - EXIT
fi
exec xorriso "$@"
