// Command mkimage builds Cairn's boot artifacts into _out (see image/internal/build):
//
//	go run ./image/cmd/mkimage [-out _out] [-machined _out/machined] [-bundle _out/bundle] [-no-iso] [-no-raw]
//	go run ./image/cmd/mkimage -out OUT2 -payload-image _out/payload.squashfs -version V2   # a second image, in seconds
//	go run ./image/cmd/mkimage -repro-check    # build twice, compare sha256
//	go run ./image/cmd/mkimage -kernel-root _out/kernel/root   # with make kernel's kernel instead of Debian's
//
// SOURCE_DATE_EPOCH fixes every timestamp; it defaults to the last git commit's time.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cairn-os/cairn/image/internal/build"
)

// fallbackEpoch (2025-01-01) is used outside a git checkout without SOURCE_DATE_EPOCH: any fixed
// value keeps builds reproducible, and FAT cannot store dates before 1980.
const fallbackEpoch = 1735689600

func main() {
	var (
		c       build.Config
		repro   bool
		listMod bool
		noISO   bool
		noRaw   bool
		rawSize string
	)
	flag.StringVar(&c.Out, "out", "_out", "output directory")
	flag.StringVar(&c.Machined, "machined", "_out/machined", "machined binary to ship as /sbin/machined")
	flag.StringVar(&c.Init, "init", "", "prebuilt init binary (default: go build ./init)")
	flag.StringVar(&c.BundleDir, "bundle", "_out/bundle", "Kubernetes bundle directory (skipped when absent)")
	flag.StringVar(&c.PayloadImage, "payload-image", "", "use this payload image, made by another build (e.g. _out/payload.squashfs), instead of packing -bundle: "+
		"it is linked or copied to OUT/payload.squashfs and the root image records its sum, so an image that differs only in -version or -machined builds in seconds")
	flag.StringVar(&c.SignKey, "sign-key", "", "PEM file of the Ed25519 key that signs cairn-upgrade.tar (cairnctl gen upgrade-key makes one); nodes whose config has machine.upgrade.publicKey take only signed bundles")
	flag.StringVar(&c.Version, "version", "", "version for os-release (default: git describe)")
	flag.StringVar(&c.Cmdline, "cmdline", "console=tty0 console=ttyS0 panic=10", "kernel command line of the ISO and raw disk (panic=10: a kernel that panics reboots, so a disk with A/B slots falls back to the other slot)")
	flag.StringVar(&c.HostRoot, "host-root", "/", "where the tools (and, without -kernel-root, the kernel and modules) are taken from")
	flag.StringVar(&c.KernelRoot, "kernel-root", "", "where the kernel (boot/vmlinuz-VERSION) and its modules (lib/modules/VERSION) are taken from, e.g. _out/kernel/root from make kernel (default: -host-root)")
	flag.StringVar(&rawSize, "raw-size", "4G", "size of cairn.raw (sparse), with suffix M or G")
	flag.BoolVar(&noISO, "no-iso", false, "skip cairn.iso")
	flag.BoolVar(&noRaw, "no-raw", false, "skip cairn.raw")
	flag.BoolVar(&c.PayloadOnly, "payload-only", false, "only stage the Kubernetes payload tree in OUT/payload (what sandbox mode runs from)")
	flag.BoolVar(&repro, "repro-check", false, "build twice into OUT/repro and fail unless the artifacts are identical")
	flag.BoolVar(&listMod, "list-modules", false, "print the names of the modules the image ships from the kernel (-kernel-root or -host-root), one per line, and exit: what make kernel builds in")
	flag.Parse()
	if listMod {
		names, err := build.ModuleNames(cmp.Or(c.KernelRoot, c.HostRoot))
		if err != nil {
			fatal(err)
		}
		fmt.Println(strings.Join(names, "\n"))
		return
	}
	c.ISO, c.Raw, c.Log = !noISO, !noRaw, os.Stdout

	var err error
	if c.RawSize, err = parseSize(rawSize); err != nil {
		fatal(fmt.Errorf("-raw-size: %w", err))
	}
	if c.Epoch, err = sourceDateEpoch(); err != nil {
		fatal(err)
	}
	if c.Version == "" {
		c.Version = gitOutput("describe", "--always", "--dirty")
		if c.Version == "" {
			c.Version = "dev"
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if repro {
		// Both builds must use the same init binary path rule; building it inside each output keeps
		// the check honest (the init build is part of what must be reproducible).
		err = build.ReproCheck(ctx, c, filepath.Join(c.Out, "repro"))
	} else {
		err = build.Run(ctx, c)
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
	os.Exit(1)
}

func sourceDateEpoch() (int64, error) {
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		e, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
		}
		return e, nil
	}
	if v := gitOutput("log", "-1", "--format=%ct"); v != "" {
		return strconv.ParseInt(v, 10, 64)
	}
	fmt.Printf("mkimage: no SOURCE_DATE_EPOCH and no git commit; using %d\n", fallbackEpoch)
	return fallbackEpoch, nil
}

func gitOutput(args ...string) string {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * mult, nil
}
