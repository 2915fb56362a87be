package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/internal/modload"
)

// linuxSystem does boot's effects for real.
type linuxSystem struct{}

func (linuxSystem) Mkdir(dir string) error { return os.MkdirAll(dir, 0o755) }

func (linuxSystem) Mount(m mount) error {
	return unix.Mount(m.source, m.target, m.fstype, m.flags, m.data)
}

func (linuxSystem) KernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

func (linuxSystem) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// LoadModule loads a module file (modload.Load says how). A module that is already loaded is fine.
func (linuxSystem) LoadModule(file, params string) error {
	if err := modload.Load(file, params); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

func (linuxSystem) Exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

func (linuxSystem) Chdir(dir string) error  { return unix.Chdir(dir) }
func (linuxSystem) Chroot(dir string) error { return unix.Chroot(dir) }

func (linuxSystem) NoHugePages() error {
	return unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0)
}

func (linuxSystem) Exec(argv0 string, argv, env []string) error {
	return unix.Exec(argv0, argv, env)
}

func (linuxSystem) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// FreeInitramfs removes everything on the initramfs but keep. It refuses to run unless "/" is the
// kernel's ramfs/tmpfs rootfs, and never descends into another filesystem, so a mistake cannot
// delete a real disk.
func (linuxSystem) FreeInitramfs(keep string) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs("/", &sfs); err != nil {
		return fmt.Errorf("statfs /: %w", err)
	}
	if sfs.Type != unix.RAMFS_MAGIC && sfs.Type != unix.TMPFS_MAGIC {
		return fmt.Errorf("/ is not an initramfs (filesystem magic %#x)", sfs.Type)
	}
	var root unix.Stat_t
	if err := unix.Lstat("/", &root); err != nil {
		return fmt.Errorf("stat /: %w", err)
	}
	return removeSameDev("/", root.Dev, keep)
}

func removeSameDev(dir string, dev uint64, keep string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if p == keep {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if st.Dev != dev {
			continue // a mount point: not ours to delete
		}
		if e.IsDir() {
			if err := removeSameDev(p, dev, keep); err != nil {
				return err
			}
		}
		if err := unix.Unlinkat(unix.AT_FDCWD, p, unlinkFlags(e.IsDir())); err != nil {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}

func unlinkFlags(dir bool) int {
	if dir {
		return unix.AT_REMOVEDIR
	}
	return 0
}

// AttachLoop binds file to a free loop device, read-only. The file may be deleted afterwards: the loop
// device keeps it open. No autoclear: it would detach the device as soon as this function closes it,
// before the mount takes its own reference; the root stays mounted until power-off anyway.
func (linuxSystem) AttachLoop(file string) (string, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer ctl.Close()
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
	}
	dev := fmt.Sprintf("/dev/loop%d", n)
	backing, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer backing.Close()
	loop, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer loop.Close()
	cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_READ_ONLY
	if err := unix.IoctlLoopConfigure(int(loop.Fd()), &cfg); err != nil {
		return "", fmt.Errorf("LOOP_CONFIGURE %s: %w", dev, err)
	}
	return dev, nil
}

func rebootNow() {
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
}
