package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// call is one mount(2) call.
type call struct {
	Source, Target, FSType string
	Flags                  uintptr
	Data                   string
}

// String is how a call reads in errors and test failures.
func (c call) String() string {
	return fmt.Sprintf("mount(%q, %q, %q, %#x, %q)", c.Source, c.Target, c.FSType, c.Flags, c.Data)
}

// flagOptions are the -o words that are mount(2) flags rather than
// filesystem data, as util-linux's mount reads them.
var flagOptions = map[string]struct {
	set, clear uintptr
}{
	"defaults":    {0, 0},
	"ro":          {syscall.MS_RDONLY, 0},
	"rw":          {0, syscall.MS_RDONLY},
	"nosuid":      {syscall.MS_NOSUID, 0},
	"suid":        {0, syscall.MS_NOSUID},
	"nodev":       {syscall.MS_NODEV, 0},
	"dev":         {0, syscall.MS_NODEV},
	"noexec":      {syscall.MS_NOEXEC, 0},
	"exec":        {0, syscall.MS_NOEXEC},
	"sync":        {syscall.MS_SYNCHRONOUS, 0},
	"async":       {0, syscall.MS_SYNCHRONOUS},
	"dirsync":     {syscall.MS_DIRSYNC, 0},
	"remount":     {syscall.MS_REMOUNT, 0},
	"bind":        {syscall.MS_BIND, 0},
	"rbind":       {syscall.MS_BIND | syscall.MS_REC, 0},
	"noatime":     {syscall.MS_NOATIME, 0},
	"atime":       {0, syscall.MS_NOATIME},
	"nodiratime":  {syscall.MS_NODIRATIME, 0},
	"diratime":    {0, syscall.MS_NODIRATIME},
	"relatime":    {syscall.MS_RELATIME, 0},
	"norelatime":  {0, syscall.MS_RELATIME},
	"strictatime": {syscall.MS_STRICTATIME, 0},
	"mand":        {syscall.MS_MANDLOCK, 0},
	"nomand":      {0, syscall.MS_MANDLOCK},
	"silent":      {syscall.MS_SILENT, 0},
	"loud":        {0, syscall.MS_SILENT},
}

// propagationOptions change a mount's propagation. The kernel takes them in a
// call of their own, so they are applied after the mount itself.
var propagationOptions = map[string]uintptr{
	"private":     syscall.MS_PRIVATE,
	"rprivate":    syscall.MS_PRIVATE | syscall.MS_REC,
	"shared":      syscall.MS_SHARED,
	"rshared":     syscall.MS_SHARED | syscall.MS_REC,
	"slave":       syscall.MS_SLAVE,
	"rslave":      syscall.MS_SLAVE | syscall.MS_REC,
	"unbindable":  syscall.MS_UNBINDABLE,
	"runbindable": syscall.MS_UNBINDABLE | syscall.MS_REC,
}

// ignoredFlags are util-linux flags that change nothing here: we never
// canonicalize paths, never write /etc/mtab and print nothing extra.
var ignoredFlags = map[string]bool{"-n": true, "-v": true, "-i": true, "-c": true, "--no-canonicalize": true, "--no-mtab": true}

var errUsage = errors.New("usage: mount [-t TYPE] [-o OPTIONS] [SOURCE] TARGET")

// planMount turns a util-linux style command line into mount(2) calls. It
// covers what kubelet's mount-utils runs: `mount [flags] [-t TYPE] [-o OPTS]
// [SOURCE] TARGET`, tmpfs with size/mode data, bind mounts and remounts.
func planMount(args []string) ([]call, error) {
	var fstype string
	var opts []string
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-t" || a == "-o":
			if i+1 == len(args) {
				return nil, fmt.Errorf("%s needs a value: %w", a, errUsage)
			}
			i++
			if a == "-t" {
				fstype = args[i]
			} else {
				opts = append(opts, strings.Split(args[i], ",")...)
			}
		case strings.HasPrefix(a, "-t") && len(a) > 2:
			fstype = a[2:]
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			opts = append(opts, strings.Split(a[2:], ",")...)
		case a == "-r":
			opts = append(opts, "ro")
		case a == "-w":
			opts = append(opts, "rw")
		case a == "--bind" || a == "-B":
			opts = append(opts, "bind")
		case a == "--rbind" || a == "-R":
			opts = append(opts, "rbind")
		case ignoredFlags[a]:
		case strings.HasPrefix(a, "-") && len(a) > 1:
			return nil, fmt.Errorf("unsupported flag %s: %w", a, errUsage)
		default:
			pos = append(pos, a)
		}
	}

	var flags, propagation uintptr
	var data []string
	for _, o := range opts {
		if o == "" {
			continue
		}
		if f, ok := flagOptions[o]; ok {
			flags = flags&^f.clear | f.set
		} else if p, ok := propagationOptions[o]; ok {
			propagation = p
		} else {
			data = append(data, o)
		}
	}

	var source, target string
	switch len(pos) {
	case 1:
		target = pos[0]
	case 2:
		source, target = pos[0], pos[1]
	default:
		return nil, errUsage
	}

	var calls []call
	switch {
	case flags == 0 && propagation != 0 && len(data) == 0 && fstype == "":
		// `mount --make-rshared`-like use: only change propagation.
	case source == "" && flags&syscall.MS_REMOUNT == 0:
		return nil, fmt.Errorf("no source for %s: %w", target, errUsage)
	case fstype == "" && flags&(syscall.MS_BIND|syscall.MS_REMOUNT) == 0:
		// util-linux would probe the device; a node with no blkid cannot.
		return nil, fmt.Errorf("mount %s on %s: no filesystem type given (-t)", source, target)
	default:
		calls = append(calls, call{Source: source, Target: target, FSType: fstype, Flags: flags, Data: strings.Join(data, ",")})
		// A new bind mount ignores ro, nosuid and friends; util-linux
		// applies them with a second, remounting call, and so do we.
		extra := flags &^ (syscall.MS_BIND | syscall.MS_REC)
		if flags&syscall.MS_BIND != 0 && flags&syscall.MS_REMOUNT == 0 && extra != 0 {
			calls = append(calls, call{Source: source, Target: target, Flags: syscall.MS_REMOUNT | syscall.MS_BIND | extra})
		}
	}
	if propagation != 0 {
		calls = append(calls, call{Source: "none", Target: target, Flags: propagation})
	}
	return calls, nil
}

// planUmount reads `umount [-f] [-l] TARGET` and returns the target and the
// umount2(2) flags.
func planUmount(args []string) (string, int, error) {
	var flags int
	var pos []string
	for _, a := range args {
		switch {
		case a == "-f":
			flags |= syscall.MNT_FORCE
		case a == "-l":
			flags |= syscall.MNT_DETACH
		case ignoredFlags[a]:
		case strings.HasPrefix(a, "-") && len(a) > 1:
			return "", 0, fmt.Errorf("unsupported flag %s: usage: umount [-f] [-l] TARGET", a)
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 1 {
		return "", 0, errors.New("usage: umount [-f] [-l] TARGET")
	}
	return pos[0], flags, nil
}
