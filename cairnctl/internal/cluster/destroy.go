package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// Destroy stops every VM of the cluster and removes its directory. It finds the VMs by their node
// directories rather than the state file, so a cluster whose create died half-way, or whose VMs have
// already exited, is removed all the same.
func Destroy(ctx context.Context, root, name string, p *Progress) error {
	if err := CheckName(name); err != nil {
		return err
	}
	dir := Dir(root, name)
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no cluster %s in %s (see `cairnctl cluster list`)", name, root)
		}
		return err
	}
	nodes, err := nodeDirs(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, nd := range nodes {
		node := filepath.Base(nd)
		pid, running := qemu.Running(nd)
		if !running {
			p.Printf("%s: QEMU is not running", node)
			continue
		}
		if err := qemu.Kill(nd); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", node, err))
			continue
		}
		if err := waitGone(ctx, nd); err != nil {
			errs = append(errs, fmt.Errorf("node %s (pid %d): %w", node, pid, err))
			continue
		}
		p.Printf("%s: stopped QEMU (pid %d)", node, pid)
	}
	if len(errs) > 0 {
		// Keep the directory: its pid files are how a second destroy finds what is still running.
		return fmt.Errorf("cluster %s: %w; its directory %s is kept", name, errors.Join(errs...), dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cluster %s: remove %s: %w", name, dir, err)
	}
	p.Printf("removed %s", dir)
	return nil
}

// waitGone waits for the QEMU of a node directory to be gone: Kill's SIGKILL returns before the
// process has exited.
func waitGone(ctx context.Context, nodeDir string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if _, running := qemu.Running(nodeDir); !running {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("QEMU still runs: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// nodeDirs lists a cluster's node directories.
func nodeDirs(clusterDir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(clusterDir, nodesDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(clusterDir, nodesDir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}
