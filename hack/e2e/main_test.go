//go:build e2e

// Package e2e boots Cairn nodes in QEMU and drives them only through the cairnctl binary, the way a user
// does: `cairnctl cluster create` boots the VMs (the launcher), every other check is a cairnctl command
// against the node's forwarded machine API. It needs the built image in _out (`make image`), QEMU, and
// root for mkfs/debugfs on a disk image. Run it with `make e2e`.
//
// One VM runs at a time: this machine has two cores and QEMU emulates (TCG).
package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

var (
	repoRoot string // the repository, two levels up
	imageDir string // the built image: $CAIRN_IMAGE_DIR or _out
	cairnctl string // the binary under test, built by TestMain
	stateDir string // --state-dir of every cluster the tests make
	// kubectlBin is the bundle's own kubectl: the tests need no kubectl on the host, and it is the
	// version the nodes run.
	kubectlBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if repoRoot, err = filepath.Abs("../.."); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	imageDir = os.Getenv("CAIRN_IMAGE_DIR")
	if imageDir == "" {
		imageDir = filepath.Join(repoRoot, "_out")
	}
	var missing []string
	for _, f := range []string{"vmlinux", "initramfs.cpio.zst", "payload.squashfs", "cairn.iso", "cairn.raw"} {
		if _, err := os.Stat(filepath.Join(imageDir, f)); err != nil {
			missing = append(missing, filepath.Join(imageDir, f))
		}
	}
	kubectlBin = filepath.Join(repoRoot, "_out", "bundle", "bin", "kubectl")
	if d := os.Getenv("CAIRN_BUNDLE_DIR"); d != "" {
		kubectlBin = filepath.Join(d, "bin", "kubectl")
	}
	if _, err := os.Stat(kubectlBin); err != nil {
		missing = append(missing, kubectlBin)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: the image is not built: missing %v\nbuild it with `make image` (or set CAIRN_IMAGE_DIR)\n", missing)
		return 1
	}
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "mkfs.ext4", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %s is not installed (make deps installs it)\n", tool)
			return 1
		}
	}
	tmp, err := os.MkdirTemp("", "cairn-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	cairnctl, stateDir = filepath.Join(tmp, "cairnctl"), filepath.Join(tmp, "clusters")
	start := time.Now()
	build := exec.Command("go", "build", "-o", cairnctl, "./cairnctl")
	build.Dir, build.Env = repoRoot, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: build cairnctl: %v\n%s", err, out)
		return 1
	}
	fmt.Printf("e2e: built cairnctl in %v; image %s; clusters in %s\n", time.Since(start).Round(time.Millisecond), imageDir, stateDir)
	code := m.Run()
	destroyLeftovers()
	return code
}

// destroyLeftovers stops any cluster a failed or interrupted test left behind, so no QEMU outlives the
// suite.
func destroyLeftovers() {
	out, err := exec.Command(cairnctl, "cluster", "list", "--state-dir", stateDir, "-o", "json").Output()
	if err != nil {
		return
	}
	var infos []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(out, &infos) != nil {
		return
	}
	for _, ci := range infos {
		fmt.Printf("e2e: destroying the leftover cluster %s\n", ci.Name)
		_ = exec.Command(cairnctl, "cluster", "destroy", "--name", ci.Name, "--state-dir", stateDir).Run()
	}
}
