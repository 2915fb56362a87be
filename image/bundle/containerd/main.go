// Command containerd is one multi-call binary for the containerd daemon and
// its runc shim, containerd-shim-runc-v2. Both are thin mains over
// containerd's packages, and the shim is mostly code the daemon links
// anyway, so one binary costs little more than the daemon alone.
//
// It runs the shim when called as containerd-shim-runc-v2 (the symlink
// containerd looks up in PATH for the io.containerd.runc.v2 runtime) or when
// its first argument is -namespace: the shim's "start" re-executes its own
// binary through /proc/self/exe (os.Executable), which names this binary,
// with "-namespace NS -id ID -address ADDR". The daemon has no such flag.
// Anything else runs the daemon with the pinned version's own main.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task/plugin"
	_ "github.com/containerd/containerd/v2/cmd/containerd/builtins"
	"github.com/containerd/containerd/v2/cmd/containerd/command"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
)

// shimName is the runc shim's binary name, which containerd derives from
// the runtime name io.containerd.runc.v2.
const shimName = "containerd-shim-runc-v2"

// shimTree holds the code of the runc shim's own plugins. Both mains load
// every plugin registered in the process, and the packages of both register
// theirs at init: each side must see only its own.
const shimTree = "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/"

func main() {
	isShim := runsShim(os.Args)
	keepPlugins(isShim)
	if isShim {
		// As upstream's cmd/containerd-shim-runc-v2.
		shim.RunShim(context.Background(), manager.NewShimManager("io.containerd.runc.v2"))
		return
	}
	// As upstream's cmd/containerd.
	if err := command.App().Run(context.Background(), os.Args); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "containerd:", err)
		os.Exit(1)
	}
}

// runsShim says whether argv asks for the runc shim.
func runsShim(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	return filepath.Base(argv[0]) == shimName || (len(argv) > 1 && argv[1] == "-namespace")
}

// fromShim says whether a plugin is one of the shim's: its InitFn is code
// under the shim's command tree.
func fromShim(r *plugin.Registration) bool {
	if r.InitFn == nil {
		return false
	}
	fn := runtime.FuncForPC(reflect.ValueOf(r.InitFn).Pointer())
	return fn != nil && strings.HasPrefix(fn.Name(), shimTree)
}

// keepPlugins leaves registered only the plugins of one side, in the order
// the registry would load them.
func keepPlugins(shimSide bool) {
	keep := registry.Graph(func(r *plugin.Registration) bool { return fromShim(r) != shimSide })
	registry.Reset()
	for i := range keep {
		registry.Register(&keep[i])
	}
}
