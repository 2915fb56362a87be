// Command bundle builds Cairn's Kubernetes bundle from pinned Go modules:
// the multi-call kube binary (with CoreDNS), etcd, pause,
// cairn-mount, the multi-call containerd (with its runc shim), ctr, runc,
// the CNI plugins and flannel, plus one OCI
// archive of every image a node runs (images.tar) and its listing
// (images.txt).
//
//	go run ./cmd/bundle [--out DIR] [--force]   build (skipped when up to date)
//	go run ./cmd/bundle pin                      rewrite the wrappers' go.mod (kube/ etcd/ flannel/ containerd/) from versions.env
//
// Run it from image/bundle.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	out := flag.String("out", "../../_out/bundle", "output directory")
	versionsFile := flag.String("versions", "versions.env", "pinned versions (its directory is the bundle source tree)")
	force := flag.Bool("force", false, "rebuild even when the stamp says the bundle is up to date")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: bundle [flags]        build the bundle\n       bundle pin            rewrite the wrappers' go.mod (kube/ etcd/ flannel/ containerd/) from versions.env\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	src, err := filepath.Abs(filepath.Dir(*versionsFile))
	if err != nil {
		fail(err)
	}
	versionsPath := filepath.Join(src, filepath.Base(*versionsFile))
	switch flag.Arg(0) {
	case "":
		outDir, err := filepath.Abs(*out)
		if err != nil {
			fail(err)
		}
		err = build(ctx, buildConfig{src: src, versions: versionsPath, out: outDir, force: *force})
		if err != nil {
			fail(err)
		}
	case "pin":
		if err := pinModules(ctx, src, versionsPath); err != nil {
			fail(err)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "bundle: %v\n", err)
	os.Exit(1)
}
