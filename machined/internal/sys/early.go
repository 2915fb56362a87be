package sys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Mount is one mount as plain data; Apply makes it real.
type Mount struct {
	Source, Target, FSType string
	Flags                  uintptr
	Data                   string
}

// EarlyMounts are what machined mounts as PID 1 after init has mounted /proc, /sys, /dev and /run: the
// kernel interfaces containers and kubelet need, and RAM-backed places for the read-only root's writable
// directories until the disks are mounted (EPHEMERAL later covers /var).
var EarlyMounts = []Mount{
	{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	{"tmpfs", "/var", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
	{"cgroup2", "/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RELATIME, "nsdelegate"},
	{"bpf", "/sys/fs/bpf", "bpf", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RELATIME, "mode=0700"},
	{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666"},
	{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
	{"mqueue", "/dev/mqueue", "mqueue", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
}

// Apply creates the target and mounts.
func (m Mount) Apply() error {
	if err := os.MkdirAll(m.Target, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", m.Target, err)
	}
	if err := unix.Mount(m.Source, m.Target, m.FSType, m.Flags, m.Data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", m.FSType, m.Target, err)
	}
	return nil
}

// MountEarly applies EarlyMounts, makes /etc writable and makes every mount shared, so mounts kubelet
// makes under /var/lib/kubelet propagate to containerd and back (the root of a machine without systemd
// starts private).
func MountEarly() error {
	for _, m := range EarlyMounts {
		if err := m.Apply(); err != nil {
			return err
		}
	}
	if err := WritableEtc("/etc"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	return nil
}

// WritableEtc replaces dir (read-only in the root image) with a tmpfs holding a copy of its contents:
// machined writes hostname, hosts, resolv.conf and the Kubernetes and CNI configs there. /etc is a few
// kilobytes, so a copy is simpler than an overlay and needs no module.
func WritableEtc(dir string) error {
	type entry struct {
		rel  string
		mode fs.FileMode
		data []byte
		link string
	}
	var entries []entry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{rel: rel, mode: info.Mode()}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			e.link, err = os.Readlink(path)
		case d.Type().IsRegular():
			e.data, err = os.ReadFile(path)
		}
		entries = append(entries, e)
		return err
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(dir, e.rel)
		switch {
		case e.mode.IsDir():
			errs = append(errs, os.Mkdir(p, e.mode.Perm()))
		case e.link != "":
			errs = append(errs, os.Symlink(e.link, p))
		case e.mode.IsRegular():
			errs = append(errs, os.WriteFile(p, e.data, e.mode.Perm()))
		}
	}
	return errors.Join(errs...)
}
