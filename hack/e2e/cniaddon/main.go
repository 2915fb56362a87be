// Command cniaddon is the end-to-end tests' stand-in for a network add-on of the user's own (Calico,
// Cilium), installed the way their installers work: run in a privileged pod with the host's /opt/cni/bin
// and /etc/cni/net.d mounted under /host, it copies itself there as the CNI plugin cairn-e2e-net, with a
// network config that names it and sorts before Cairn's. Run as that plugin (containerd sets
// CNI_COMMAND), it hands the request to the bridge plugin on CNI_PATH, so a pod on its network gets an
// address of Subnet: proof that containerd found the plugin in /opt/cni/bin.
//
// Before it installs, it makes what Calico's agent makes in the host's network namespace, an IPIP link
// and an ipset, and removes them again, and reads the raw tables as legacy iptables does: the kernel loads
// their modules on request (the node's modprobe, machined by that name), as on any distribution, or the
// installer fails.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

const (
	name   = "cairn-e2e-net"
	subnet = "172.30.99.0/24" // the e2e test checks the pod's address against it
	binDir = "/host/opt/cni/bin"
	conf   = "/host/etc/cni/net.d/05-" + name + ".conflist"
)

func main() {
	if os.Getenv("CNI_COMMAND") != "" {
		plugin()
		return
	}
	if err := datapath(); err != nil {
		fmt.Fprintln(os.Stderr, "cniaddon:", err)
		os.Exit(1)
	}
	fmt.Println("made an IPIP link and a hash:ip ipset, and removed them")
	if err := rawTables(); err != nil {
		fmt.Fprintln(os.Stderr, "cniaddon:", err)
		os.Exit(1)
	}
	fmt.Println("read the IPv4 and IPv6 raw tables")
	if err := install(); err != nil {
		fmt.Fprintln(os.Stderr, "cniaddon:", err)
		os.Exit(1)
	}
	fmt.Printf("installed %s into /opt/cni/bin and %s\n", name, filepath.Base(conf))
	for {
		time.Sleep(time.Hour) // a DaemonSet's installer stays up
	}
}

// datapath makes an IPIP link (the kernel asks for "rtnl-link-ipip") and a hash:ip ipset (it asks for
// "nfnetlink-subsys-6", then "ip_set_hash:ip"), then removes both.
func datapath() error {
	link := &netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: "e2eipip0"}, Local: net.IPv4(192, 0, 2, 1), Remote: net.IPv4(192, 0, 2, 2)}
	if err := netlink.LinkAdd(link); err != nil {
		return fmt.Errorf("make IPIP link %s: %w", link.Name, err)
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("remove IPIP link %s: %w", link.Name, err)
	}
	const set = "cairn-e2e"
	if err := netlink.IpsetCreate(set, "hash:ip", netlink.IpsetCreateOptions{Family: unix.AF_INET}); err != nil {
		return fmt.Errorf("make hash:ip ipset %s: %w", set, err)
	}
	if err := netlink.IpsetDestroy(set); err != nil {
		return fmt.Errorf("remove ipset %s: %w", set, err)
	}
	return nil
}

// rawTables asks the kernel for the IPv4 and IPv6 raw tables' headers, as legacy iptables does for
// `iptables -t raw` (Calico's untracked policies): the kernel asks for "iptable_raw" and "ip6table_raw".
func rawTables() error {
	for _, t := range []struct {
		family, level int
		module        string
	}{{unix.AF_INET, unix.SOL_IP, "iptable_raw"}, {unix.AF_INET6, unix.SOL_IPV6, "ip6table_raw"}} {
		fd, err := unix.Socket(t.family, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket for %s: %w", t.module, err)
		}
		// struct ipt_getinfo (ip6t_getinfo is the same): the table's name, then its hooks, underflows,
		// entry count and size, which the kernel fills in.
		const getInfo, size = 64, 84 // IPT_SO_GET_INFO, sizeof(struct ipt_getinfo)
		var info [size]byte
		copy(info[:], "raw")
		n := uint32(size)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(t.level), getInfo,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&n)), 0)
		unix.Close(fd)
		if errno != 0 {
			return fmt.Errorf("read the raw table (%s): %w", t.module, errno)
		}
	}
	return nil
}

// plugin runs the bridge plugin in this process's place, with the same environment and stdin.
func plugin() {
	for _, dir := range filepath.SplitList(os.Getenv("CNI_PATH")) {
		p := filepath.Join(dir, "bridge")
		if _, err := os.Stat(p); err == nil {
			err = syscall.Exec(p, []string{p}, os.Environ())
			fail(fmt.Sprintf("exec %s: %v", p, err))
		}
	}
	fail("no bridge plugin on CNI_PATH " + os.Getenv("CNI_PATH"))
}

// fail writes a CNI error result (stdout, as the CNI spec says) and exits.
func fail(msg string) {
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": msg})
	os.Stdout.Write(b)
	os.Exit(1)
}

// install copies this binary and the network config into place, each through a rename, as installers
// do, so containerd never runs a half-written plugin.
func install() error {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		return err
	}
	network := map[string]any{
		"cniVersion": "1.0.0",
		"name":       name,
		"plugins": []any{map[string]any{
			"type": name, "bridge": "e2enet0", "isGateway": true,
			"ipam": map[string]any{"type": "host-local", "ranges": [][]map[string]string{{{"subnet": subnet}}}},
		}},
	}
	cfg, err := json.Marshal(network)
	if err != nil {
		return err
	}
	if err := writeRename(filepath.Join(binDir, name), self, 0o755); err != nil {
		return err
	}
	return writeRename(conf, cfg, 0o644)
}

func writeRename(path string, data []byte, perm os.FileMode) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path))
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
