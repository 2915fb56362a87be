// Command cairn-kube-proxy is /usr/local/bin/kube-proxy in the kube-proxy
// image: it runs kube-proxy from the multi-call kube binary, in nftables mode
// without kube-proxy's start-up clean-up of iptables-mode rules when the node
// has none.
//
// At every start in nftables mode kube-proxy removes what its iptables and
// ipvs modes may have left (cmd/kube-proxy/app.platformCleanup): it runs
// iptables and ip6tables about forty times, to look for and delete chains
// and rules that a node which never ran those modes does not have. Each run
// starts a dynamically linked program anew: about 1 s natively, about 3.5 s
// of an idle node's start under emulation and more while the node starts its
// first pods, before kube-proxy writes a rule of its own, so before any
// Service (CoreDNS's way to the API server among them) works. A Cairn node
// boots with empty tables; iptables-mode rules are there only if kube-proxy
// ran in that mode on it since (cluster.proxy.mode changed from iptables).
//
// Only when its environment says ModeEnv=nftables (Cairn's DaemonSet sets
// it) does it list the node's nftables chains, once (`nft -j list chains`:
// under iptables-nft, iptables' tables are nftables tables of the ip and ip6
// families), and choose kube-proxy's environment:
//   - as it is when a chain of kube-proxy's iptables or ipvs modes (KUBE-*) is
//     there, so kube-proxy removes them as upstream's does, or when the chains
//     cannot be listed;
//   - otherwise with a PATH that has nft (a directory holding only a link to
//     it) and no directory with iptables in it, so the clean-up finds no
//     iptables to run and skips it. nftables mode runs nft, never iptables.
//
// Without ModeEnv it changes nothing, so a DaemonSet of one's own runs
// kube-proxy as upstream's image does. It is the image's kube-proxy rather
// than a command the DaemonSet names so that a node still on an image
// without it runs Cairn's DaemonSet during an upgrade: the variable is then
// ignored. Either way it replaces itself with kube-proxy (exec: same PID,
// signals and exit code).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// NFTOnlyDir is the directory of the kube-proxy image that holds a link to
// nft and nothing else (image/bundle/internal/images).
const NFTOnlyDir = "/usr/libexec/cairn-kube-proxy"

// ModeEnv is the variable through which Cairn's DaemonSet tells the launcher
// kube-proxy's mode (machined/internal/addons).
const ModeEnv = "CAIRN_KUBE_PROXY_MODE"

// KubeBinary is the multi-call binary that runs kube-proxy when started by
// that name.
const KubeBinary = "/usr/local/bin/kube"

func main() {
	env := os.Environ()
	if os.Getenv(ModeEnv) == "nftables" {
		out, err := exec.Command("nft", "-j", "list", "chains").Output()
		var note string
		env, note = environ(env, out, err, isFile)
		fmt.Fprintln(os.Stderr, "cairn-kube-proxy: "+note)
	}
	err := syscall.Exec(KubeBinary, append([]string{"kube-proxy"}, os.Args[1:]...), env)
	fmt.Fprintf(os.Stderr, "cairn-kube-proxy: run %s: %v\n", KubeBinary, err)
	os.Exit(1)
}

// environ is kube-proxy's environment, given the output and error of
// `nft -j list chains`, and a line saying why.
func environ(env []string, chains []byte, listErr error, isFile func(string) bool) ([]string, string) {
	if listErr != nil {
		return env, fmt.Sprintf("cannot list the node's nftables chains (%v): kube-proxy looks for iptables-mode rules itself", listErr)
	}
	left, err := leftovers(chains)
	if err != nil {
		return env, fmt.Sprintf("cannot read the node's nftables chains (%v): kube-proxy looks for iptables-mode rules itself", err)
	}
	if len(left) > 0 {
		return env, fmt.Sprintf("iptables-mode chains on the node (%s): kube-proxy removes them", strings.Join(left, ", "))
	}
	env = withPath(env, isFile)
	return env, "no iptables-mode chains on the node: kube-proxy starts without its iptables clean-up"
}

// leftovers names the chains of kube-proxy's iptables and ipvs modes in the
// output of `nft -j list chains`: KUBE-* chains of the ip and ip6 families
// (iptables-nft's), outside nftables mode's own table.
func leftovers(chains []byte) ([]string, error) {
	var doc struct {
		NFTables []struct {
			Chain *struct {
				Family string `json:"family"`
				Table  string `json:"table"`
				Name   string `json:"name"`
			} `json:"chain"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(chains, &doc); err != nil {
		return nil, err
	}
	if doc.NFTables == nil {
		return nil, fmt.Errorf("no nftables list in nft's output")
	}
	var left []string
	for _, o := range doc.NFTables {
		c := o.Chain
		if c == nil || (c.Family != "ip" && c.Family != "ip6") || c.Table == "kube-proxy" {
			continue
		}
		if strings.HasPrefix(c.Name, "KUBE-") {
			left = append(left, c.Family+" "+c.Table+" "+c.Name)
		}
	}
	return left, nil
}

// withPath returns env with PATH's directories that hold iptables or
// ip6tables left out and NFTOnlyDir first.
func withPath(env []string, isFile func(string) bool) []string {
	dirs := []string{NFTOnlyDir}
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		v, ok := strings.CutPrefix(kv, "PATH=")
		if ok {
			for _, d := range filepath.SplitList(v) {
				if d != "" && !isFile(filepath.Join(d, "iptables")) && !isFile(filepath.Join(d, "ip6tables")) {
					dirs = append(dirs, d)
				}
			}
		}
		return ok
	})
	return append(out, "PATH="+strings.Join(dirs, string(filepath.ListSeparator)))
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}
