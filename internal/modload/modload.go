// Package modload loads one kernel module file, for every program of the image that loads modules:
// init, machined and the bench's floor (image/internal/fakemachined).
package modload

import (
	"os"
	"strings"

	"github.com/u-root/u-root/pkg/kmodule"
	"golang.org/x/sys/unix"
)

// Helper is where the root image has the program that answers the kernel's module requests: a link to
// machined, which is machined/internal/modprobe by that name. It is not at the kernel's default modprobe
// path, /sbin/modprobe: machined points the kernel at it once the boot's own modules are loaded. Until
// then every request would start a program on the path to the API's first answer (mounting the BPF
// filesystem asks for bpf_preload, which no image has), and what the boot needs it loads itself.
const Helper = "/usr/libexec/cairn/modprobe"

// Load loads the kernel module in the file at path with params, without its dependencies.
//
// An uncompressed module (.ko, what the image ships) goes to finit_module(2): the kernel reads the file
// itself. u-root's kmodule.FileInit means to do that too, but in v0.16.0 its compression check answers the
// file itself for ".ko", which FileInit takes for a decompressing reader: it read every module whole into
// the caller's heap and handed it over with init_module(2). In a boot that was 5 MB of machined's heap,
// read in growing buffers, and most of the collections before the API answered. A compressed module
// (.ko.xz, .ko.gz, .ko.zst) still goes through kmodule, which decompresses it.
func Load(path, params string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if !strings.HasSuffix(path, ".ko") {
		return kmodule.FileInit(f, params, 0)
	}
	return os.NewSyscallError("finit_module", unix.FinitModule(int(f.Fd()), params, 0))
}
