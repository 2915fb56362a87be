// Package rootfs decides the contents of Cairn's read-only root image and packs it with mksquashfs.
//
// Layout (merged /usr, like Debian, so host binaries find their loader and libraries unchanged):
//
//	/bin /sbin /lib /lib64   symlinks into /usr
//	/usr/sbin/machined       the agent, exec'd by init as /sbin/machined: a link into MachinedDir,
//	                         where init mounts the machined image (MachinedTree; pack.go says why
//	                         machined has an image of its own)
//	/usr/libexec/cairn/modprobe  a link to machined, which answers the kernel's module requests by
//	                         that name (machined/internal/modprobe)
//	/usr/libexec/cairn/unpack-payload  a link to machined, which unpacks the ISO's payload stream
//	                         by that name (machined/internal/unpack)
//	/usr/sbin/mkfs.xfs ...   disk tools from the build host, with their libraries in
//	                         /usr/lib/x86_64-linux-gnu and the loader in /usr/lib64
//	/usr/lib/modules/VERSION the shipped modules, their modules.dep and modules.builtin for kmodule,
//	                         modules.alias (the shipped modules' aliases), and cairn.load: the
//	                         modules the boot loads, in load order (the others wait for the
//	                         kernel to ask for them)
//	/usr/share/cairn/payload.sha256   the Kubernetes payload image's SHA-256, size and dm-verity root (api/payload)
//	/etc                     os-release, mke2fs.conf; machined lays a writable overlay on it
//	MountPoints              empty directories machined mounts over
package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/image/internal/tree"
	"github.com/cairn-os/cairn/internal/modload"
)

// MountPoints are empty in the image: the root is read-only, so machined can only mount over
// directories that already exist. /system/state is where STATE goes; EPHEMERAL is mounted on /var, and
// its /var/opt on /opt (what add-ons install on the host, such as a network add-on's CNI plugins).
var MountPoints = []string{"/dev", "/proc", "/sys", "/run", "/tmp", "/var", "/opt", "/system/state", "/mnt", payload.MountPoint}

// MachinedDir is the machined image's mount point in the root image, and MachinedBin the binary's name
// in that image. init (init/mounts.go) mounts it there before it switches root.
const (
	MachinedDir = "/usr/lib/cairn/machined"
	MachinedBin = "machined"
)

// LoadListName is the file, in /lib/modules/VERSION of both the initramfs and the rootfs, that lists
// module paths in load order.
const LoadListName = "cairn.load"

// Config is what goes into the root image.
type Config struct {
	Version       string   // Cairn's version, for os-release
	KernelVersion string   // uname -r of the shipped kernel
	ModulesDir    string   // host /lib/modules/VERSION
	Modules       []string // module paths relative to ModulesDir, in load order
	Requested     []string // module paths shipped for the kernel's requests alone, not in the load list
	DepFile       []byte   // modules.dep for Modules and Requested
	AliasFile     []byte   // modules.alias lines of Modules and Requested
	PayloadSum    string   // what the payload images must be (api/payload.Records); "" for an image without Kubernetes
	Tools         []string // host executables to ship in /usr/sbin, with their libraries
	HostRoot      string   // "/" normally; where Tools and their libraries are looked up
	HostFiles     map[string]string
}

// DefaultHostFiles are configuration files copied as they are (guest path → host path).
var DefaultHostFiles = map[string]string{"/etc/mke2fs.conf": "/etc/mke2fs.conf"}

// Build returns the root image's tree, and notes about optional parts that were left out.
func Build(c Config) (*tree.Tree, []string, error) {
	t := tree.New()
	var notes []string
	if err := addUsrMerge(t); err != nil {
		return nil, nil, err
	}
	if err := t.Dirs(0o755, MountPoints...); err != nil {
		return nil, nil, err
	}
	if err := t.Dirs(0o755, "/usr/bin", "/usr/sbin", "/etc"); err != nil {
		return nil, nil, err
	}
	if err := t.Dirs(0o755, MachinedDir); err != nil {
		return nil, nil, err
	}
	if err := t.Link("/usr/sbin/machined", "../"+strings.TrimPrefix(MachinedDir, "/usr/")+"/"+MachinedBin); err != nil {
		return nil, nil, err
	}
	// Not at the kernel's default modprobe path (/sbin/modprobe): see modload.Helper.
	if err := t.Link(modload.Helper, "../../sbin/machined"); err != nil {
		return nil, nil, err
	}
	if err := t.Link(payload.UnpackHelper, "../../sbin/machined"); err != nil {
		return nil, nil, err
	}
	if err := t.Bytes("/usr/lib/os-release", osRelease(c.Version), 0o644); err != nil {
		return nil, nil, err
	}
	if err := t.Link("/etc/os-release", "../usr/lib/os-release"); err != nil {
		return nil, nil, err
	}
	if err := addModules(t, c); err != nil {
		return nil, nil, err
	}
	if err := addTools(t, c.HostRoot, c.Tools); err != nil {
		return nil, nil, err
	}
	guestFiles := make([]string, 0, len(c.HostFiles))
	for g := range c.HostFiles {
		guestFiles = append(guestFiles, g)
	}
	sort.Strings(guestFiles)
	for _, g := range guestFiles {
		if err := t.Copy(g, filepath.Join(c.HostRoot, c.HostFiles[g]), 0o644); err != nil {
			return nil, nil, err
		}
	}
	if c.PayloadSum == "" {
		notes = append(notes, "no Kubernetes payload: the image boots to the maintenance API but cannot run Kubernetes")
	} else if err := t.Bytes(payload.SumFile, []byte(c.PayloadSum+"\n"), 0o644); err != nil {
		return nil, nil, err
	}
	return t, notes, nil
}

// MachinedTree is the machined image's tree: the binary alone, at its root.
func MachinedTree(machined string) (*tree.Tree, error) {
	t := tree.New()
	if err := t.Copy("/"+MachinedBin, machined, 0o755); err != nil {
		return nil, err
	}
	return t, nil
}

func osRelease(version string) []byte {
	return []byte(fmt.Sprintf("NAME=Cairn\nID=cairn\nVERSION=%s\nVERSION_ID=%s\nPRETTY_NAME=\"Cairn %s\"\n", version, version, version))
}

func addModules(t *tree.Tree, c Config) error {
	dir := "/usr/lib/modules/" + c.KernelVersion
	for _, m := range slices.Concat(c.Modules, c.Requested) {
		if err := t.Copy(dir+"/"+m, filepath.Join(c.ModulesDir, m), 0o644); err != nil {
			return err
		}
	}
	if err := t.Bytes(dir+"/modules.dep", c.DepFile, 0o644); err != nil {
		return err
	}
	if err := t.Bytes(dir+"/modules.alias", c.AliasFile, 0o644); err != nil {
		return err
	}
	if err := t.Bytes(dir+"/"+LoadListName, []byte(strings.Join(c.Modules, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	// kmodule reads modules.builtin so probing a built-in name succeeds instead of failing.
	if _, err := os.Stat(filepath.Join(c.ModulesDir, "modules.builtin")); err == nil {
		return t.Copy(dir+"/modules.builtin", filepath.Join(c.ModulesDir, "modules.builtin"), 0o644)
	}
	return nil
}
