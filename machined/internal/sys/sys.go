// Package sys is the only place in machined that makes raw system calls: mounts, power, hostname,
// filesystem statistics and the PID-1 reaper. Everything else takes these as small interfaces, so it runs
// in unit tests and in sandbox mode.
package sys

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Mounter mounts and unmounts with mount(2).
type Mounter struct{}

// Mount is mount(2), with the target named in the error.
func (Mounter) Mount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return &os.PathError{Op: "mount " + fstype, Path: target, Err: err}
	}
	return nil
}

// Unmount unmounts target; a target that is not mounted is not an error.
func (Mounter) Unmount(target string, detach bool) error {
	flags := 0
	if detach {
		flags = unix.MNT_DETACH
	}
	err := unix.Unmount(target, flags)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return &os.PathError{Op: "unmount", Path: target, Err: err}
	}
	return nil
}

// MakePrivate makes every mount under target private, so mounts made below it stay out of the parent's
// namespace (sandbox tests in their own mount namespace).
func MakePrivate(target string) error {
	return unix.Mount("", target, "", unix.MS_REC|unix.MS_PRIVATE, "")
}

// Usage is a filesystem's size and use.
type Usage struct{ Size, Used uint64 }

// Statfs reports the size and use of the filesystem holding path.
func Statfs(path string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return Usage{Size: st.Blocks * bs, Used: (st.Blocks - st.Bfree) * bs}, nil
}

// SetHostname sets the kernel's hostname.
func SetHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("set hostname %q: %w", name, err)
	}
	return nil
}

// Machine reboots or powers off the machine: sync, then reboot(2). Unmounting is the caller's job (the
// stop tasks), so that errors are reported per volume first.
type Machine struct{}

// Reboot restarts the machine; it does not return on success.
func (Machine) Reboot() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}

// PowerOff stops the machine; it does not return on success.
func (Machine) PowerOff() error {
	unix.Sync()
	return unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

// CtrlAltDelSignals makes the kernel send SIGINT to PID 1 on ctrl-alt-del instead of rebooting at once.
func CtrlAltDelSignals() { unix.Reboot(unix.LINUX_REBOOT_CMD_CAD_OFF) }

// RereadPartitions asks the kernel to re-read a disk's partition table (BLKRRPART), retrying while the
// disk is briefly busy (a probe still has it open).
func RereadPartitions(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := 0; ; i++ {
		err = unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0)
		if err == nil || !errors.Is(err, unix.EBUSY) || i == 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("re-read partitions of %s: %w", path, err)
	}
	return nil
}

// BindShared makes dir a mount point of its own that propagates mounts both ways (mount --bind dir dir;
// mount --make-rshared dir). Doing it twice is harmless: an existing shared mount point is left as is.
func BindShared(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}

// Bind mounts src onto dst (mount --bind), unless dst is already a mount of src: machined calls it on
// every boot of the same process in sandbox mode.
func Bind(src, dst string) error {
	var a, b unix.Stat_t
	if unix.Stat(src, &a) == nil && unix.Stat(dst, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino {
		return nil
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	return nil
}

// IsMountPoint reports whether path is the root of a mounted filesystem: its device differs from its
// parent's (or it is "/").
func IsMountPoint(path string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false, err
	}
	if err := unix.Stat(path+"/..", &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev || st.Ino == parent.Ino, nil
}
