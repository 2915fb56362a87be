package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cairn-os/cairn/image/internal/tree"
)

// DefaultTools are the host programs the node runs: the filesystem tools machined uses to format, check
// and grow its disks (mkfs.fat: the EFI system partition of a disk it installs onto), cryptsetup (an
// encrypted STATE, machined/internal/disk/crypt), veritysetup (the payload through dm-verity,
// machined/internal/verity; it shares cryptsetup's libraries), and iptables (nft backend), which the CNI bridge and
// portmap plugins run for masquerading and host ports.
var DefaultTools = []string{
	"/usr/sbin/mkfs.xfs", "/usr/sbin/xfs_repair", "/usr/sbin/xfs_growfs",
	"/usr/sbin/mke2fs", "/usr/sbin/e2fsck", "/usr/sbin/resize2fs", "/usr/sbin/tune2fs",
	"/usr/sbin/mkfs.fat",
	"/usr/sbin/cryptsetup", "/usr/sbin/veritysetup",
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

// usrMerge are Debian's merged-/usr links. The tools' PT_INTERP (/lib64/ld-linux-x86-64.so.2) reaches
// the loader through them, so every tree that carries tools needs them.
var usrMerge = []struct{ name, target string }{
	{"/bin", "usr/bin"}, {"/sbin", "usr/sbin"}, {"/lib", "usr/lib"}, {"/lib64", "usr/lib64"},
}

func addUsrMerge(t *tree.Tree) error {
	for _, l := range usrMerge {
		if err := t.Link(l.name, l.target); err != nil {
			return err
		}
	}
	return nil
}

// Tools returns a tree holding only the given host tools, laid out exactly as in the root image: each at
// /usr/sbin/NAME with its libraries, the loader, iptables' extensions, the usual alternative names and
// the merged-/usr links. The Kubernetes bundle packs it as an image layer (image/cmd/hosttools), so
// kube-proxy and flannel run the same nft and iptables as the node.
func Tools(hostRoot string, tools []string) (*tree.Tree, error) {
	t := tree.New()
	if err := addUsrMerge(t); err != nil {
		return nil, err
	}
	if err := addTools(t, hostRoot, tools); err != nil {
		return nil, err
	}
	return t, nil
}

// addTools ships each tool at /usr/sbin/NAME with its libraries under their sonames.
func addTools(t *tree.Tree, hostRoot string, tools []string) error {
	for _, tool := range tools {
		b, err := ResolveELF(hostRoot, tool)
		if err != nil {
			return fmt.Errorf("tool %s: %w (hack/deps.sh installs the Debian packages the tools are copied from)", tool, err)
		}
		if err := t.Copy("/usr/sbin/"+filepath.Base(tool), filepath.Join(hostRoot, tool), 0o755); err != nil {
			return err
		}
		if err := addInterp(t, hostRoot, b.Interp); err != nil {
			return err
		}
		for _, so := range b.Sonames() {
			dst := libDirs[0] + "/" + so
			if t.Has(dst) {
				continue
			}
			if err := t.Copy(dst, filepath.Join(hostRoot, b.Libs[so]), 0o644); err != nil {
				return err
			}
		}
	}
	if t.Has("/usr/sbin/xtables-nft-multi") {
		if err := addXtables(t, hostRoot); err != nil {
			return err
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

// addXtables ships iptables' extension directory as it is on the host.
func addXtables(t *tree.Tree, hostRoot string) error {
	exts, err := os.ReadDir(filepath.Join(hostRoot, xtablesDir))
	if err != nil {
		return fmt.Errorf("iptables extensions: %w (install iptables)", err)
	}
	for _, e := range exts {
		if !strings.HasSuffix(e.Name(), ".so") {
			continue
		}
		switch {
		case e.Type().IsRegular():
			err = t.Copy(xtablesDir+"/"+e.Name(), filepath.Join(hostRoot, xtablesDir, e.Name()), 0o644)
		case e.Type()&os.ModeSymlink != 0:
			// Several targets share one file (MASQUERADE, SNAT, DNAT → libxt_NAT.so).
			var target string
			if target, err = os.Readlink(filepath.Join(hostRoot, xtablesDir, e.Name())); err == nil {
				err = t.Link(xtablesDir+"/"+e.Name(), target)
			}
		}
		if err != nil {
			return err
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
