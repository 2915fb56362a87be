package modload

import (
	"path"
	"strings"

	"github.com/cairn-os/cairn/internal/kcmdline"
)

// Params are the parameters a kernel command line gives loadable modules, by module name. The kernel
// applies MODULE.PARAM=VALUE itself only to the modules built into it, at boot; a loadable module gets
// its parameters from whoever loads it (kmod's modprobe reads /proc/cmdline for them). Every module of a
// Cairn node is loaded by init, machined or machined's modprobe, so each passes them on, and
// `libata.force=noncq` or `nvme_core.default_ps_max_latency_us=0` works on Cairn as on any distribution.
type Params map[string][]string

// ParseParams reads the MODULE.PARAM[=VALUE] words of a kernel command line, up to the "--" that
// starts init's own arguments. Dashes in a module's name are underscores, as the kernel names modules;
// a value with a space is quoted again, as finit_module(2) parses its parameters like the command line.
// Other words (root=, quiet, cairn.token=, which no module is named after) are never asked for.
func ParseParams(line string) Params {
	p := Params{}
	for _, w := range kcmdline.Words(line) {
		if w == "--" {
			break
		}
		key, val, hasVal := strings.Cut(w, "=")
		mod, param, ok := strings.Cut(key, ".")
		if !ok || mod == "" || param == "" {
			continue
		}
		if hasVal {
			if strings.ContainsAny(val, " \t\n") {
				val = `"` + val + `"`
			}
			param += "=" + val
		}
		mod = strings.ReplaceAll(mod, "-", "_")
		p[mod] = append(p[mod], param)
	}
	return p
}

// For returns the parameters for the module in file (kernel/drivers/ata/libata.ko), as finit_module(2)
// takes them: "" when the command line gives it none.
func (p Params) For(file string) string { return strings.Join(p[ModuleName(file)], " ") }

// Blacklisted says whether the command line's modprobe.blacklist= (kmod's: names separated by commas, the
// word repeatable) names the module in file. Cairn's loaders then leave it out, as kmod's modprobe ignores
// a blacklisted module's aliases; `modprobe.blacklist=nouveau` keeps a driver off a node as it does on any
// distribution. (module_blacklist= is the kernel's own: it refuses such a module itself.)
func (p Params) Blacklisted(file string) bool {
	name := ModuleName(file)
	for _, v := range p["modprobe"] {
		list, ok := strings.CutPrefix(v, "blacklist=")
		if !ok {
			continue
		}
		for _, m := range strings.Split(list, ",") {
			if strings.ReplaceAll(m, "-", "_") == name {
				return true
			}
		}
	}
	return false
}

// ModuleName is the name the kernel gives the module in file: its base name without ".ko" and a
// compression suffix, dashes as underscores.
func ModuleName(file string) string {
	base := path.Base(file)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// Join puts two parameter strings together: a load list's own, then the command line's, which wins
// where both set the same parameter (the kernel takes the last value it is given).
func Join(a, b string) string { return strings.TrimSpace(a + " " + b) }
