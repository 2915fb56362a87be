// Package rootfs decides the contents of Cairn's read-only root image and packs it with mksquashfs.
//
// Layout (merged /usr, like Debian, so host binaries find their loader and libraries unchanged):
//
//	/bin /sbin /lib /lib64   symlinks into /usr
//	/usr/sbin/machined       the agent, exec'd by init as /sbin/machined
//	/usr/sbin/mkfs.xfs ...   disk tools from the build host, with their libraries in
//	                         /usr/lib/x86_64-linux-gnu and the loader in /usr/lib64
//	/usr/lib/modules/VERSION the shipped modules, their modules.dep and modules.builtin for kmodule,
//	                         modules.alias (device modaliases of the shipped modules), and
//	                         cairn.load: every shipped module in load order
//	/usr/bin /opt/cni/bin /usr/share/cairn/images.tar   the Kubernetes bundle, when built
//	/etc                     os-release, mke2fs.conf; machined lays a writable overlay on it
//	MountPoints              empty directories machined mounts over
package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cairn-os/cairn/image/internal/tree"
)

// MountPoints are empty in the image: the root is read-only, so machined can only mount over
// directories that already exist. /system/state is where STATE goes; EPHEMERAL is mounted on /var.
var MountPoints = []string{"/dev", "/proc", "/sys", "/run", "/tmp", "/var", "/system/state", "/mnt"}

// LoadListName is the file, in /lib/modules/VERSION of both the initramfs and the rootfs, that lists
// module paths in load order.
const LoadListName = "cairn.load"

// Config is what goes into the root image.
type Config struct {
	Version       string   // Cairn's version, for os-release
	Machined      string   // host path of the machined binary
	KernelVersion string   // uname -r of the shipped kernel
	ModulesDir    string   // host /lib/modules/VERSION
	Modules       []string // module paths relative to ModulesDir, in load order
	DepFile       []byte   // modules.dep for Modules
	AliasFile     []byte   // modules.alias lines of Modules
	BundleDir     string   // _out/bundle; skipped when absent
	Tools         []string // host executables to ship in /usr/sbin, with their libraries
	HostRoot      string   // "/" normally; where Tools and their libraries are looked up
	HostFiles     map[string]string
}

// DefaultTools are the host programs the node runs: the filesystem tools machined uses to format, check
// and grow its disks, and iptables (nft backend), which the CNI bridge and portmap plugins run for
// masquerading and host ports.
var DefaultTools = []string{
	"/usr/sbin/mkfs.xfs", "/usr/sbin/xfs_repair", "/usr/sbin/xfs_growfs",
	"/usr/sbin/mke2fs", "/usr/sbin/e2fsck", "/usr/sbin/resize2fs", "/usr/sbin/tune2fs",
	"/usr/sbin/xtables-nft-multi",
}

// toolLinks are the usual alternative names, pointing at a shipped tool.
var toolLinks = map[string]string{
	"mkfs.ext4": "mke2fs", "fsck.ext4": "e2fsck",
	"iptables": "xtables-nft-multi", "iptables-save": "xtables-nft-multi", "iptables-restore": "xtables-nft-multi",
	"ip6tables": "xtables-nft-multi", "ip6tables-save": "xtables-nft-multi", "ip6tables-restore": "xtables-nft-multi",
}

// xtablesDir holds iptables' match and target extensions, which it loads with dlopen at run time, so
// library resolution cannot find them: the whole directory is shipped with iptables.
const xtablesDir = "/usr/lib/x86_64-linux-gnu/xtables"

// hostBinaries are the bundle's programs that run on the node itself. The bundle's other programs
// (kube, etcd, pause, ...) run inside its images, which carry them already.
var hostBinaries = []string{"containerd", "containerd-shim-runc-v2", "runc"}

// DefaultHostFiles are configuration files copied as they are (guest path → host path).
var DefaultHostFiles = map[string]string{"/etc/mke2fs.conf": "/etc/mke2fs.conf"}

// Build returns the root image's tree, and notes about optional parts that were left out.
func Build(c Config) (*tree.Tree, []string, error) {
	t := tree.New()
	var notes []string
	for _, l := range []struct{ name, target string }{{"/bin", "usr/bin"}, {"/sbin", "usr/sbin"}, {"/lib", "usr/lib"}, {"/lib64", "usr/lib64"}} {
		if err := t.Link(l.name, l.target); err != nil {
			return nil, nil, err
		}
	}
	if err := t.Dirs(0o755, MountPoints...); err != nil {
		return nil, nil, err
	}
	if err := t.Dirs(0o755, "/usr/bin", "/usr/sbin", "/etc", "/opt/cni/bin"); err != nil {
		return nil, nil, err
	}
	if err := t.Copy("/usr/sbin/machined", c.Machined, 0o755); err != nil {
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
	if err := addTools(t, c); err != nil {
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
	note, err := addBundle(t, c.BundleDir)
	if err != nil {
		return nil, nil, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	return t, notes, nil
}

func osRelease(version string) []byte {
	return []byte(fmt.Sprintf("NAME=Cairn\nID=cairn\nVERSION=%s\nVERSION_ID=%s\nPRETTY_NAME=\"Cairn %s\"\n", version, version, version))
}

func addModules(t *tree.Tree, c Config) error {
	dir := "/usr/lib/modules/" + c.KernelVersion
	for _, m := range c.Modules {
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

// addTools ships each tool at /usr/sbin/NAME with its libraries under their sonames.
func addTools(t *tree.Tree, c Config) error {
	for _, tool := range c.Tools {
		b, err := ResolveELF(c.HostRoot, tool)
		if err != nil {
			return fmt.Errorf("tool %s: %w (hack/deps.sh image installs the packages the image copies tools from)", tool, err)
		}
		if err := t.Copy("/usr/sbin/"+filepath.Base(tool), filepath.Join(c.HostRoot, tool), 0o755); err != nil {
			return err
		}
		if err := addInterp(t, c.HostRoot, b.Interp); err != nil {
			return err
		}
		for _, so := range b.Sonames() {
			dst := libDirs[0] + "/" + so
			if t.Has(dst) {
				continue
			}
			if err := t.Copy(dst, filepath.Join(c.HostRoot, b.Libs[so]), 0o644); err != nil {
				return err
			}
		}
	}
	if t.Has("/usr/sbin/xtables-nft-multi") {
		exts, err := os.ReadDir(filepath.Join(c.HostRoot, xtablesDir))
		if err != nil {
			return fmt.Errorf("iptables extensions: %w (install iptables)", err)
		}
		for _, e := range exts {
			if !strings.HasSuffix(e.Name(), ".so") {
				continue
			}
			switch {
			case e.Type().IsRegular():
				err = t.Copy(xtablesDir+"/"+e.Name(), filepath.Join(c.HostRoot, xtablesDir, e.Name()), 0o644)
			case e.Type()&os.ModeSymlink != 0:
				// Several targets share one file (MASQUERADE, SNAT, DNAT → libxt_NAT.so).
				var target string
				if target, err = os.Readlink(filepath.Join(c.HostRoot, xtablesDir, e.Name())); err == nil {
					err = t.Link(xtablesDir+"/"+e.Name(), target)
				}
			}
			if err != nil {
				return err
			}
		}
	}
	names := make([]string, 0, len(toolLinks))
	for n := range toolLinks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if t.Has("/usr/sbin/" + toolLinks[n]) {
			if err := t.Link("/usr/sbin/"+n, toolLinks[n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// addInterp ships the dynamic loader once, in the library directory (libc also lists it as needed),
// and links the path in PT_INTERP to it. /lib64 is a link to usr/lib64 in the image, so the kernel
// finds /lib64/ld-linux-x86-64.so.2 at /usr/lib64/ld-linux-x86-64.so.2.
func addInterp(t *tree.Tree, hostRoot, interp string) error {
	if interp == "" {
		return nil
	}
	lib := libDirs[0] + "/" + filepath.Base(interp)
	if !t.Has(lib) {
		if err := t.Copy(lib, filepath.Join(hostRoot, interp), 0o755); err != nil {
			return err
		}
	}
	link := "/usr" + strings.TrimPrefix(interp, "/usr")
	if link == lib || t.Has(link) {
		return nil
	}
	rel, err := filepath.Rel(filepath.Dir(link), lib)
	if err != nil {
		return err
	}
	return t.Link(link, rel)
}

// addBundle maps _out/bundle into the image: bin/* → /usr/bin, cni/* → /opt/cni/bin,
// images.tar → /usr/share/cairn/images.tar. An absent bundle is not an error: the image then boots
// to the maintenance API but cannot run Kubernetes, which the returned note says.
func addBundle(t *tree.Tree, dir string) (string, error) {
	if dir == "" {
		return "no Kubernetes bundle: none given", nil
	}
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		return fmt.Sprintf("no Kubernetes bundle: %s does not exist (build it first to ship Kubernetes)", dir), nil
	}
	for _, name := range hostBinaries {
		if err := t.Copy("/usr/bin/"+name, filepath.Join(dir, "bin", name), 0o755); err != nil {
			return "", fmt.Errorf("bundle: %w", err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "cni"))
	if err != nil {
		return "", fmt.Errorf("bundle cni: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := t.Copy("/opt/cni/bin/"+e.Name(), filepath.Join(dir, "cni", e.Name()), 0o755); err != nil {
			return "", err
		}
	}
	if img := filepath.Join(dir, "images.tar"); fileExists(img) {
		if err := t.Copy("/usr/share/cairn/images.tar", img, 0o644); err != nil {
			return "", err
		}
	}
	return "", nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
