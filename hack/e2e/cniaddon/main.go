// Command cniaddon is the end-to-end tests' stand-in for a network add-on of the user's own (Calico,
// Cilium), installed the way their installers work: run in a privileged pod with the host's /opt/cni/bin
// and /etc/cni/net.d mounted under /host, it copies itself there as the CNI plugin cairn-e2e-net, with a
// network config that names it and sorts before Cairn's. Run as that plugin (containerd sets
// CNI_COMMAND), it hands the request to the bridge plugin on CNI_PATH, so a pod on its network gets an
// address of Subnet: proof that containerd found the plugin in /opt/cni/bin.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
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
	if err := install(); err != nil {
		fmt.Fprintln(os.Stderr, "cniaddon:", err)
		os.Exit(1)
	}
	fmt.Printf("installed %s into /opt/cni/bin and %s\n", name, filepath.Base(conf))
	for {
		time.Sleep(time.Hour) // a DaemonSet's installer stays up
	}
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
