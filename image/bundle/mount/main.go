// Command cairn-mount is a small static mount/umount for the kubelet image.
// kubelet runs `mount` and `umount` for tmpfs-backed volumes (secrets,
// projected service-account tokens) and bind mounts; the image has no
// util-linux, so this covers the subset kubelet uses. It is called through
// symlinks named mount and umount.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name != "mount" && name != "umount" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch name {
	case "mount":
		os.Exit(runMount(args))
	case "umount":
		os.Exit(runUmount(args))
	default:
		fmt.Fprintln(os.Stderr, "usage: cairn-mount mount|umount ARGS... (or call it as mount or umount)")
		os.Exit(1)
	}
}

// Exit codes follow util-linux: 1 for bad usage, 32 for a failed mount.
func runMount(args []string) int {
	calls, err := planMount(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mount: %v\n", err)
		return 1
	}
	for _, c := range calls {
		if err := syscall.Mount(c.Source, c.Target, c.FSType, c.Flags, c.Data); err != nil {
			fmt.Fprintf(os.Stderr, "mount: %s: %v\n", c, err)
			return 32
		}
	}
	return 0
}

func runUmount(args []string) int {
	target, flags, err := planUmount(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "umount: %v\n", err)
		return 1
	}
	if err := syscall.Unmount(target, flags); err != nil {
		// kubelet's mount-utils looks for "not mounted" to learn that it can
		// trust umount on a path that is no mount point.
		if errors.Is(err, syscall.EINVAL) {
			fmt.Fprintf(os.Stderr, "umount: %s: not mounted.\n", target)
		} else {
			fmt.Fprintf(os.Stderr, "umount: %s: %v\n", target, err)
		}
		return 32
	}
	return 0
}
