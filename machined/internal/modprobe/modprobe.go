// Package modprobe answers the kernel's requests for modules on a Cairn node. The root image's
// /usr/libexec/cairn/modprobe (modload.Helper) is a link to machined, which runs Main when it is called
// by that name; machined makes it the kernel's modprobe path once the boot's own modules are loaded. The
// kernel runs it as "modprobe -q -- NAME" when something asks for what no loaded module provides: a
// network add-on making an IPIP or WireGuard link ("rtnl-link-ipip"), an ipset ("nfnetlink-subsys-6",
// then "ip_set_hash:ip"), an iptables match ("ipt_u32"), a tc classifier ("cls_bpf"). It loads the
// image's module of that name, or every module whose modules.alias pattern matches it, dependencies
// first, and writes what it loaded to the kernel log (cairnctl dmesg).
//
// It is not kmod's modprobe: there is no removal and no configuration directory, because nothing on a
// node runs it but the kernel. Like kmod's, it gives a module the parameters the node's command line
// has for it (MODULE.PARAM=VALUE, modload.Params), and leaves out a module modprobe.blacklist= names.
// It is a name of machined rather than a binary of its own because the download pays for a binary
// (about 1 MiB compressed), while a request, which comes only once an add-on sets up its datapath, pays
// machined's package initialisation (18 ms natively, about half a second of an emulated vCPU), its pages
// mostly in memory already as machined's.
package modprobe

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-os/cairn/internal/modload"
	"github.com/cairn-os/cairn/machined/internal/cmdline"
	"github.com/cairn-os/cairn/machined/internal/modules"
)

const usage = `usage: modprobe [-q] [--] NAME...

Loads the kernel modules that provide each NAME (a module's name or an alias of one, such as
rtnl-link-ipip) from the image's /lib/modules/RELEASE, dependencies first. The kernel runs it for its
module requests; it writes what it loaded, and what it could not, to the kernel log.
  -q  quiet: a NAME nothing provides is logged at debug level, not as a warning (the kernel always
      passes it)
`

// system is what modprobe reads and does, so the logic runs in a unit test.
type system struct {
	dir     string                          // /lib/modules/RELEASE
	loaded  func() []string                 // the modules the kernel has (/proc/modules)
	load    func(file, params string) error // loads one module file (modload.Load)
	params  modload.Params                  // the command line's module parameters
	kernlog func(level int, msg string)
	stderr  io.Writer
}

// Name is the program name (argv[0]'s last element) by which machined is modprobe.
const Name = "modprobe"

// Main handles one request of the kernel's (args without the program name) and returns the exit status.
func Main(args []string) int {
	release, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	line, _ := cmdline.Read(os.ReadFile) // without it, modules load without the line's parameters
	s := system{
		dir: filepath.Join("/lib/modules", strings.TrimSpace(string(release))),
		loaded: func() []string {
			b, _ := os.ReadFile("/proc/modules")
			return modules.Loaded(b)
		},
		load:    modload.Load,
		params:  modload.ParseParams(line),
		kernlog: kernelLog,
		stderr:  os.Stderr,
	}
	return run(args, s)
}

// run handles one invocation and returns the exit status: 0 when every NAME is provided (loaded now,
// loaded before, or built in), 1 otherwise, 2 for a usage error.
func run(args []string, s system) int {
	quiet := false
	var names []string
	for i, a := range args {
		if a == "--" {
			names = append(names, args[i+1:]...)
			break
		}
		switch {
		case a == "-q" || a == "--quiet":
			quiet = true
		case a == "-h" || a == "--help":
			fmt.Fprint(s.stderr, usage)
			return 0
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(s.stderr, "modprobe: unknown option %s\n%s", a, usage)
			return 2
		default:
			names = append(names, a)
		}
	}
	if len(names) == 0 {
		fmt.Fprint(s.stderr, usage)
		return 2
	}
	x, err := modules.ReadIndex(s.dir)
	if err != nil {
		s.report(3, fmt.Sprintf("modprobe %s: the image's module index: %v", strings.Join(names, " "), err))
		return 1
	}
	list, _ := os.ReadFile(filepath.Join(s.dir, modules.BuiltinName))
	builtin := modules.ParseBuiltin(list)
	status := 0
	for _, name := range names {
		if !s.request(x, builtin, name, quiet) {
			status = 1
		}
	}
	return status
}

// request loads what provides name and says whether something does.
func (s system) request(x *modules.Index, builtin map[string]bool, name string, quiet bool) bool {
	r := x.Resolve(name, builtin, s.loaded())
	switch {
	case r.Builtin:
		return true
	case len(r.Modules) == 0:
		// The kernel asks quietly (-q): many of its requests are tries (a device name that may be a
		// module's alias), so the line is a debug one, there for whoever wonders what an add-on lacked.
		level := 4
		if quiet {
			level = 7
		}
		s.report(level, fmt.Sprintf("modprobe %s: no module of this image provides it", name))
		return false
	}
	n, left, err := modules.Loader{File: s.load, Params: &s.params}.LoadFiles(s.dir, r.Files)
	if err != nil {
		s.report(3, fmt.Sprintf("modprobe %s: %v", name, err))
		return false
	}
	if len(left) > 0 {
		s.report(5, fmt.Sprintf("modprobe %s: %s left out: modprobe.blacklist on the command line names it", name, strings.Join(left, ", ")))
		return false
	}
	if n > 0 {
		s.report(6, fmt.Sprintf("modprobe %s: loaded %s", name, strings.Join(r.FileNames(), ", ")))
	}
	return true
}

// report writes msg to the kernel log at level (syslog's: 3 error, 4 warning, 6 info) and to stderr,
// which the kernel's helper leaves unconnected but a person running the binary sees.
func (s system) report(level int, msg string) {
	s.kernlog(level, msg)
	fmt.Fprintln(s.stderr, msg)
}

// kernelLog writes one record to the kernel's log. A helper run by the kernel has no stdout or stderr
// that anyone reads, so this is where a node's owner sees what it did.
func kernelLog(level int, msg string) {
	f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "<%d>%s\n", level, msg)
}
