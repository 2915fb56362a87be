// Command machined is Cairn's node agent: PID 1 after the initramfs switches root, or an ordinary process
// in sandbox mode (--root DIR). It runs the node's state machine and serves the machine API; main only
// wires the parts together.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cairn-os/cairn/machined/internal/modprobe"
	"github.com/cairn-os/cairn/machined/internal/unpack"
)

// Set at build time with -ldflags -X.
var (
	version = "dev"
	commit  = ""
)

func main() {
	// The kernel runs machined by the name modprobe (the root image's link) for its module requests.
	switch filepath.Base(os.Args[0]) {
	case modprobe.Name:
		os.Exit(modprobe.Main(os.Args[1:]))
	case unpack.Name: // machined's own helper, for the ISO's payload stream (payload.go)
		os.Exit(unpack.Main(os.Args[1:], os.Stderr))
	}
	tuneRuntime()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "machined:", err)
		os.Exit(1)
	}
}
