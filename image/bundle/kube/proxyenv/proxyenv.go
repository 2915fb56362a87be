// Package proxyenv prepares kube-proxy's environment in the kube binary, so
// that in nftables mode it starts without its clean-up of iptables-mode rules
// when the node has none.
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
// it) does Prepare list the node's nftables chains, once (`nft -j list
// chains`: under iptables-nft, iptables' tables are nftables tables of the ip
// and ip6 families), and choose kube-proxy's PATH:
//   - as it is when a chain of kube-proxy's iptables or ipvs modes (KUBE-*) is
//     there, so kube-proxy removes them as upstream's does, or when the chains
//     cannot be listed;
//   - otherwise a PATH that has nft (a directory holding only a link to it)
//     and no directory with iptables in it, so the clean-up finds no iptables
//     to run and skips it. nftables mode runs nft, never iptables.
//
// Without ModeEnv it changes nothing, so a DaemonSet of one's own runs
// kube-proxy as upstream's image does. It is the image's kube-proxy that
// reads the variable rather than a command the DaemonSet names, so that a
// node still on an image without it runs Cairn's DaemonSet during an
// upgrade: the variable is then ignored.
//
// It runs inside kube-proxy's own process, before its command: until
// 2026-12-07 it was a launcher binary of its own (cairn-kube-proxy) that
// exec'd kube, which cost the payload 0.9 MB and every kube-proxy start one
// more Go program's start.
package proxyenv

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// NFTOnlyDir is the directory of the kube-proxy image that holds a link to
// nft and nothing else (image/bundle/internal/images), named after the
// launcher binary that held this code until 2026-12-07.
const NFTOnlyDir = "/usr/libexec/cairn-kube-proxy"

// ModeEnv is the variable through which Cairn's DaemonSet tells kube-proxy's
// image its mode (machined/internal/addons).
const ModeEnv = "CAIRN_KUBE_PROXY_MODE"

// Note starts the line Prepare prints, which says what it chose.
const Note = "kube-proxy's environment: "

// Prepare sets kube-proxy's PATH for this process when ModeEnv says
// nftables (see the package comment) and prints a line on w saying why;
// otherwise it does nothing. kube-proxy looks its programs up in PATH when it
// runs them, so this must come before its command runs.
func Prepare(w io.Writer) {
	if os.Getenv(ModeEnv) != "nftables" {
		return
	}
	out, err := exec.Command("nft", "-j", "list", "chains").Output()
	path, note := searchPath(os.Getenv("PATH"), out, err, isFile)
	fmt.Fprintln(w, Note+note)
	if err := os.Setenv("PATH", path); err != nil {
		fmt.Fprintf(w, "%sset PATH: %v\n", Note, err)
	}
}

// searchPath is kube-proxy's PATH, given the current one and the output and
// error of `nft -j list chains`, and a line saying why.
func searchPath(path string, chains []byte, listErr error, isFile func(string) bool) (string, string) {
	if listErr != nil {
		return path, fmt.Sprintf("cannot list the node's nftables chains (%v): kube-proxy looks for iptables-mode rules itself", listErr)
	}
	left, err := leftovers(chains)
	if err != nil {
		return path, fmt.Sprintf("cannot read the node's nftables chains (%v): kube-proxy looks for iptables-mode rules itself", err)
	}
	if len(left) > 0 {
		return path, fmt.Sprintf("iptables-mode chains on the node (%s): kube-proxy removes them", strings.Join(left, ", "))
	}
	return nftOnly(path, isFile), "no iptables-mode chains on the node: kube-proxy starts without its iptables clean-up"
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

// nftOnly returns path with its directories that hold iptables or ip6tables
// left out and NFTOnlyDir first.
func nftOnly(path string, isFile func(string) bool) string {
	dirs := []string{NFTOnlyDir}
	for _, d := range filepath.SplitList(path) {
		if d != "" && !isFile(filepath.Join(d, "iptables")) && !isFile(filepath.Join(d, "ip6tables")) {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, string(filepath.ListSeparator))
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}
