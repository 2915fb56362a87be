package upgrade

// Files on the ISO's filesystem (ISO 9660, volume ID CAIRN), as paths from its root. GRUB boots the
// kernel and the initramfs; a node booted from the ISO reads all five when it installs Cairn onto a
// disk: it builds the UKI of its first boot entry (api/uki) from the stub, the kernel, the initramfs
// and the command line the ISO booted with, and puts systemd-boot on the new ESP as LoaderPath. The
// payload is api/payload.ISOFile.
const (
	ISOKernel    = "boot/vmlinuz"
	ISOInitramfs = "boot/initramfs.cpio.zst"
	// ISOSystemdBoot is systemd-boot (systemd-bootx64.efi), from the same package as the stub.
	ISOSystemdBoot = "boot/efi/systemd-bootx64.efi"
	// ISOStub is systemd's EFI stub (linuxx64.efi.stub) that the UKI's sections are added to.
	ISOStub = "boot/efi/linuxx64.efi.stub"
	// ISOCmdline is the kernel command line baked into the image, as text with no trailing newline:
	// the one the UKI must carry, which is not /proc/cmdline (GRUB puts BOOT_IMAGE= in front of it).
	ISOCmdline = "boot/cmdline"
)
