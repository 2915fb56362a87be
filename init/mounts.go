package main

import "golang.org/x/sys/unix"

// mount is one entry of a mount table.
type mount struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

// kernelMounts are mounted first and moved into the new root before switching, so machined starts
// with them in place. /run is where machined keeps its runtime state until disks are up.
var kernelMounts = []mount{
	{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
	{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
}

// Paths inside the initramfs, written by the image builder (image/internal/build).
const (
	rootImage = "/rootfs.squashfs" // the read-only root
	// machinedImage holds machined alone, mounted at machinedDir inside the root image, where the root
	// image's /usr/sbin/machined links to (image/internal/rootfs: MachinedDir, and pack.go for why).
	machinedImage = "/machined.squashfs"
	machinedDir   = "/usr/lib/cairn/machined"
	rootFSType    = "squashfs"
	newRoot       = "/newroot"
	machined      = "/sbin/machined"
	modulesDir    = "/lib/modules"
	moduleList    = "cairn.load" // in modulesDir/RELEASE: module paths in load order
	rootMountFl   = unix.MS_RDONLY | unix.MS_NODEV
)
