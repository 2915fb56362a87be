package modules

import (
	"bufio"
	"bytes"
	"path"
	"slices"
	"strings"
)

// BuiltinName is the kernel's list of modules built into it (modules.builtin), in /lib/modules/RELEASE.
const BuiltinName = "modules.builtin"

// Request is what the kernel asked modprobe for, resolved against the image's modules.
type Request struct {
	// Files load what was asked for, each module's dependencies before it, relative to the modules
	// directory; nil when nothing needs loading.
	Files []string
	// Modules are the names of the modules that provide it (one, or every module with a matching alias).
	Modules []string
	// Builtin says the kernel has the asked-for module built in: nothing to load.
	Builtin bool
}

// Resolve answers a request the kernel makes through modprobe (request_module): name is a module's name
// ("xt_u32") or an alias of one ("rtnl-link-ipip", "nfnetlink-subsys-6", "ip_set_hash:ip", "ipt_u32").
// As kmod does, a module of that name wins, a name in builtin (modules.builtin's names) needs nothing,
// and otherwise every shipped module with a matching modules.alias pattern (a shell glob) provides it.
// Modules named in loaded are left out of Files but not of Modules. An empty Modules with Builtin false
// means the image has nothing for name.
//
// It reads modules.dep rather than the load list: the modules shipped for the kernel's requests alone
// (a network add-on's tunnels, sets and classifiers) are in modules.dep and modules.alias, not in the
// list the boot loads.
func (x *Index) Resolve(name string, builtin map[string]bool, loaded []string) Request {
	byName := map[string]string{}
	for rel := range x.Deps {
		byName[norm(moduleName(rel))] = rel
	}
	var r Request
	n := norm(name)
	switch {
	case byName[n] != "":
		r.Modules = []string{n}
	case builtin[n]:
		r.Builtin = true
		return r
	default:
		for mod, pats := range x.Aliases {
			if byName[mod] != "" && matchAlias(pats, name) {
				r.Modules = append(r.Modules, mod)
			}
		}
	}
	have := map[string]bool{}
	for _, l := range loaded {
		have[norm(l)] = true
	}
	// Sorted for a stable answer; kmod loads an alias's modules in modules.alias order, which no
	// request seen here depends on.
	slices.Sort(r.Modules)
	for _, mod := range r.Modules {
		rel := byName[mod]
		deps := x.Deps[rel]
		// modules.dep lists the deepest dependency last: loading from the end keeps modprobe's order.
		for i := len(deps) - 1; i >= 0; i-- {
			r.Files = appendNew(r.Files, deps[i], have)
		}
		r.Files = appendNew(r.Files, rel, have)
	}
	return r
}

// FileNames are the module names of Files, in load order.
func (r Request) FileNames() []string {
	out := make([]string, len(r.Files))
	for i, f := range r.Files {
		out[i] = moduleName(f)
	}
	return out
}

// matchAlias says whether one of the patterns matches name, dashes and underscores alike as kmod
// compares them (but inside a pattern's [...] ranges, where a dash means a range).
func matchAlias(patterns []string, name string) bool {
	for _, p := range patterns {
		n := name
		if !strings.Contains(p, "[") {
			p, n = norm(p), norm(name)
		}
		if ok, err := path.Match(p, n); err == nil && ok {
			return true
		}
	}
	return false
}

// appendNew appends rel unless it is there already or its module is in loaded.
func appendNew(files []string, rel string, loaded map[string]bool) []string {
	if loaded[norm(moduleName(rel))] {
		return files
	}
	if slices.Contains(files, rel) {
		return files
	}
	return append(files, rel)
}

// ParseBuiltin reads modules.builtin (one module path per line) into module names.
func ParseBuiltin(data []byte) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out[norm(moduleName(path.Base(line)))] = true
		}
	}
	return out
}
