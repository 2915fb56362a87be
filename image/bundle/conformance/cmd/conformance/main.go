// Command conformance builds what `make conformance` runs and reads what it reported:
//
//	conformance build -out _out/conformance -bundle _out/bundle
//	    e2e.test and ginkgo from the pinned Kubernetes module (version flags set), and every image the
//	    [Conformance] tests run, as one OCI archive (images.tar) for `cairnctl image import`; cached by a
//	    stamp of every input, so a second run rebuilds nothing
//	conformance images
//	    the images the suite's manifest names, and which are built, left out (and why) or the node's own
//	conformance registry -listen HOST:PORT -archive _out/conformance/images.tar
//	    serves the test images over the registry protocol, the node's mirror for the few tests that
//	    pull with imagePullPolicy: Always
//	conformance summary JUNIT.xml...
//	    N passed, N failed, N skipped and the failed tests' names; exit status 1 when one failed
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	var failed errFailed
	switch {
	case errors.As(err, &failed):
		os.Exit(1)
	case err != nil:
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		os.Exit(1)
	}
}

const usage = `usage:
  conformance build -out DIR -bundle DIR    build e2e.test, ginkgo and the test images (cached)
  conformance images                        list the suite's images and what is done with each
  conformance registry -listen HOST:PORT    serve images.tar over the registry protocol (until stopped)
  conformance summary JUNIT.xml...          count a run's results; exit 1 if a test failed`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:])
	case "images":
		return listImages(os.Stdout)
	case "registry":
		return serveRegistry(ctx, args[1:])
	case "summary":
		if len(args) < 2 {
			return errors.New(usage)
		}
		return summarize(os.Stdout, args[1:])
	case "-h", "--help", "help":
		fmt.Println(usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}
