package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// SeedFile is a node's NoCloud seed in its directory: a small vfat volume labelled CIDATA.
const SeedFile = "seed.img"

// seedSerial is the seed disk's serial, so status and logs can tell it from Cairn's own disks.
const seedSerial = "cidata"

// WriteSeed writes a NoCloud seed volume at path, as a cloud's or a hypervisor's tooling would: a vfat
// filesystem labelled CIDATA with user-data and meta-data at its root (the node's hostname in
// meta-data's local-hostname), and network-config when networkConfig is not nil. It uses mkfs.vfat and
// mtools' mcopy, so it needs no root and no mount.
func WriteSeed(ctx context.Context, path string, userData []byte, hostname string, networkConfig []byte) error {
	for _, tool := range []string{"mkfs.vfat", "mcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("writing a NoCloud seed needs %s (Debian packages dosfstools and mtools): %w", tool, err)
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".seed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	files := map[string][]byte{
		"user-data": userData,
		"meta-data": fmt.Appendf(nil, "instance-id: %s\nlocal-hostname: %s\n", hostname, hostname),
	}
	if networkConfig != nil {
		files["network-config"] = networkConfig
	}
	args := []string{"-i", path}
	for name, data := range files {
		f := filepath.Join(tmp, name)
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return err
		}
		args = append(args, f)
	}
	os.Remove(path)
	// 2 MiB: the volume only holds a config (about 12 KiB) and its metadata.
	run := func(name string, args ...string) error {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := run("mkfs.vfat", "-n", "CIDATA", "-C", path, "2048"); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil { // the user data holds the cluster's secrets
		return err
	}
	return run("mcopy", append(args, "::")...)
}

// seedDisk writes node n's seed in its directory and returns it as a disk to attach.
func seedDisk(ctx context.Context, nodeDir string, userData []byte, hostname string, networkConfig []byte) (qemu.Disk, error) {
	if err := os.MkdirAll(nodeDir, 0o700); err != nil {
		return qemu.Disk{}, err
	}
	path := filepath.Join(nodeDir, SeedFile)
	if err := WriteSeed(ctx, path, userData, hostname, networkConfig); err != nil {
		return qemu.Disk{}, fmt.Errorf("node %s: %w", hostname, err)
	}
	return qemu.Disk{Serial: seedSerial, File: path}, nil
}

// initUserData is the first control plane's user data: its config, with bootstrap: true.
func initUserData(nodeDir string, n Node) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(nodeDir, NodeConfigFile))
	if err != nil {
		return nil, err
	}
	ud, err := config.InitUserData(raw)
	if err != nil {
		return nil, fmt.Errorf("node %s: user data: %w", n.Name, err)
	}
	return ud, nil
}

// seedNetworkConfig is the network-config a node's seed carries: its address on the cluster's L2, by
// its NIC's MAC address (cloud-init's version 2), as a platform gives a machine its static address.
func seedNetworkConfig(n Node) []byte {
	return fmt.Appendf(nil, "version: 2\nethernets:\n  l2:\n    match:\n      macaddress: %q\n    addresses: [%s]\n", n.MAC, n.Prefix())
}
