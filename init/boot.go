package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/internal/modload"
)

// system is every effect boot has, so tests can check the order of the switch-root sequence without
// root. linuxSystem is the real one.
type system interface {
	Mkdir(dir string) error
	Mount(m mount) error
	KernelRelease() (string, error)
	ReadFile(name string) ([]byte, error)
	LoadModule(file, params string) error
	AttachLoop(file string) (device string, err error)
	Exists(name string) bool
	// FreeInitramfs deletes everything on the initramfs except keep, to give its RAM back.
	FreeInitramfs(keep string) error
	Chdir(dir string) error
	Chroot(dir string) error
	// NoHugePages switches transparent huge pages off for this process, across the exec (machined's
	// start): see hugePagesOff.
	NoHugePages() error
	Exec(argv0 string, argv, env []string) error
	Logf(format string, args ...any)
}

// boot runs the whole initramfs stage. It returns only on error; each error names the step.
func boot(s system, args, env []string) error {
	for _, m := range kernelMounts {
		if err := s.Mkdir(m.target); err != nil {
			return fmt.Errorf("create %s: %w", m.target, err)
		}
		if err := s.Mount(m); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	n, err := loadModules(s)
	if err != nil {
		return err
	}
	dev, err := s.AttachLoop(rootImage)
	if err != nil {
		return fmt.Errorf("mount root image: attach %s to a loop device: %w", rootImage, err)
	}
	if err := s.Mkdir(newRoot); err != nil {
		return fmt.Errorf("mount root image: create %s: %w", newRoot, err)
	}
	if err := s.Mount(mount{dev, newRoot, rootFSType, rootMountFl, ""}); err != nil {
		return fmt.Errorf("mount root image: %s (%s) on %s: %w", dev, rootFSType, newRoot, err)
	}
	mdev, err := s.AttachLoop(machinedImage)
	if err != nil {
		return fmt.Errorf("mount machined image: attach %s to a loop device: %w", machinedImage, err)
	}
	if err := s.Mount(mount{mdev, newRoot + machinedDir, rootFSType, rootMountFl, ""}); err != nil {
		return fmt.Errorf("mount machined image: %s (%s) on %s: %w", mdev, rootFSType, newRoot+machinedDir, err)
	}
	if !s.Exists(newRoot + machined) {
		return fmt.Errorf("root image has no %s", machined)
	}
	for _, m := range kernelMounts {
		if err := s.Mount(mount{m.target, newRoot + m.target, "", unix.MS_MOVE, ""}); err != nil {
			return fmt.Errorf("move %s into the root image: %w", m.target, err)
		}
	}
	if err := s.FreeInitramfs(newRoot); err != nil {
		return fmt.Errorf("free initramfs: %w", err)
	}
	// The classic switch_root: make the new root "/" by moving its mount over it, then chroot into it.
	if err := s.Chdir(newRoot); err != nil {
		return fmt.Errorf("switch root: chdir %s: %w", newRoot, err)
	}
	if err := s.Mount(mount{newRoot, "/", "", unix.MS_MOVE, ""}); err != nil {
		return fmt.Errorf("switch root: move %s to /: %w", newRoot, err)
	}
	if err := s.Chroot("."); err != nil {
		return fmt.Errorf("switch root: chroot: %w", err)
	}
	if err := s.Chdir("/"); err != nil {
		return fmt.Errorf("switch root: chdir /: %w", err)
	}
	s.Logf("cairn init: root image mounted from %s (%d modules loaded), starting %s", dev, n, machined)
	// The kernel passed the command line's unknown words to us as args; machined gets them unchanged
	// (it reads /proc/cmdline itself for its own parameters).
	env = machinedEnv(env)
	if hugePagesOff(env) {
		if err := s.NoHugePages(); err != nil {
			// Only memory is at stake: machined starts with the kernel's policy.
			s.Logf("cairn init: huge pages stay on for machined's start: %v", err)
		}
	}
	if err := s.Exec(machined, append([]string{machined}, args...), env); err != nil {
		return fmt.Errorf("exec %s: %w", machined, err)
	}
	return nil
}

// noHugePages is the Go runtime setting that keeps transparent huge pages off machined's heap. Debian's
// kernel backs every anonymous region with 2 MiB pages where it can (THP "always"), so a heap of a few
// MB, spread over the runtime's arenas, was resident as whole huge pages: 10 of machined's 19 MiB of
// private memory in Running were huge pages, mostly untouched. Only machined is changed: the node's
// THP policy, which the workloads see, stays the kernel's.
const noHugePages = "disablethp=1"

// hugePagesOff says whether machined is to start without transparent huge pages: unless the command line
// said disablethp=0, the runtime keeps them off machined's heap, and init switches them off for the whole
// process (PR_SET_THP_DISABLE, which the kernel keeps across exec) so that none lands in the memory the
// runtime maps beside its heap while machined starts. machined marks those mappings and switches the
// process flag back on before it starts anything, since every child would inherit it
// (machined/internal/sys/hugepages.go says why and what it saved).
func hugePagesOff(env []string) bool {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			return slices.Contains(strings.Split(v, ","), noHugePages)
		}
	}
	return false
}

// machinedEnv is machined's environment: the kernel's, with noHugePages added to GODEBUG unless the
// command line (which the kernel passes on as the environment) already says what disablethp is.
func machinedEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	set := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			set = true
			if !strings.Contains(v, "disablethp=") {
				kv = "GODEBUG=" + strings.TrimPrefix(v+","+noHugePages, ",")
			}
		}
		out = append(out, kv)
	}
	if !set {
		out = append(out, "GODEBUG="+noHugePages)
	}
	return out
}

// loadModules loads the builder's list in order and returns how many it loaded.
func loadModules(s system) (int, error) {
	rel, err := s.KernelRelease()
	if err != nil {
		return 0, fmt.Errorf("load modules: kernel release: %w", err)
	}
	dir := path.Join(modulesDir, rel)
	list, err := s.ReadFile(path.Join(dir, moduleList))
	if err != nil {
		return 0, fmt.Errorf("load modules: %w (does the initramfs belong to kernel %s?)", err, rel)
	}
	mods, err := parseModuleList(string(list))
	if err != nil {
		return 0, fmt.Errorf("load modules: %s: %w", path.Join(dir, moduleList), err)
	}
	// The kernel gives MODULE.PARAM=VALUE only to the modules built into it; a loadable module's come from
	// whoever loads it, after the list's own. A line that cannot be read gives none.
	line, _ := s.ReadFile("/proc/cmdline")
	cmdParams := modload.ParseParams(string(line))
	for _, m := range mods {
		params := modload.Join(m.params, cmdParams.For(m.path))
		if err := s.LoadModule(path.Join(dir, m.path), params); err != nil {
			if params != "" {
				return 0, fmt.Errorf("load module %s with parameters %q: %w", m.path, params, err)
			}
			return 0, fmt.Errorf("load module %s: %w", m.path, err)
		}
	}
	return len(mods), nil
}
