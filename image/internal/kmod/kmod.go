// Package kmod computes which kernel modules an image ships and in what order they load: the
// dependency closure of a few top-level names over modules.dep, with softdeps added explicitly because
// u-root's kmodule (what init and machined load modules with) ignores them.
package kmod

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Index is what the build needs from one kernel's /lib/modules/VERSION.
type Index struct {
	Deps    map[string][]string // module path (relative, as in modules.dep) → paths it needs
	ByName  map[string]string   // module name → path
	Pre     map[string][]string // module name → softdep names/aliases to load before it
	Post    map[string][]string // module name → softdep names/aliases to load after it
	Aliases map[string][]string // exact alias (no wildcards) → module names
	Builtin map[string]bool     // names compiled into the kernel
}

// Name turns a module path or name into the kernel's module name: no directory, no .ko suffix
// (compressed or not), dashes as underscores.
func Name(p string) string {
	n := path.Base(p)
	if i := strings.Index(n, ".ko"); i >= 0 {
		n = n[:i]
	}
	return strings.ReplaceAll(n, "-", "_")
}

// Load reads modules.dep, modules.softdep, modules.alias and modules.builtin from dir. Only
// modules.dep is required.
func Load(dir string) (*Index, error) {
	ix := &Index{Pre: map[string][]string{}, Post: map[string][]string{}, Aliases: map[string][]string{}, Builtin: map[string]bool{}}
	parsers := []struct {
		file     string
		required bool
		parse    func(*Index, io.Reader) error
	}{
		{"modules.dep", true, (*Index).parseDep},
		{"modules.softdep", false, (*Index).parseSoftdep},
		{"modules.alias", false, (*Index).parseAlias},
		{"modules.builtin", false, (*Index).parseBuiltin},
	}
	for _, p := range parsers {
		f, err := os.Open(filepath.Join(dir, p.file))
		if os.IsNotExist(err) && !p.required {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = p.parse(ix, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, p.file), err)
		}
	}
	return ix, nil
}

// Parse builds an Index from the text of modules.dep and modules.softdep alone (tests, or kernels
// without the other files).
func Parse(dep, softdep io.Reader) (*Index, error) {
	ix := &Index{Pre: map[string][]string{}, Post: map[string][]string{}, Aliases: map[string][]string{}, Builtin: map[string]bool{}}
	if err := ix.parseDep(dep); err != nil {
		return nil, fmt.Errorf("modules.dep: %w", err)
	}
	if softdep != nil {
		if err := ix.parseSoftdep(softdep); err != nil {
			return nil, fmt.Errorf("modules.softdep: %w", err)
		}
	}
	return ix, nil
}

func (ix *Index) parseDep(r io.Reader) error {
	ix.Deps, ix.ByName = map[string][]string{}, map[string]string{}
	return eachLine(r, func(n int, line string) error {
		mod, deps, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("line %d: no colon", n)
		}
		mod = strings.TrimSpace(mod)
		ix.Deps[mod] = strings.Fields(deps)
		ix.ByName[Name(mod)] = mod
		return nil
	})
}

// parseSoftdep reads lines "softdep MODULE pre: A B post: C".
func (ix *Index) parseSoftdep(r io.Reader) error {
	return eachLine(r, func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "softdep" {
			return nil
		}
		mod := Name(f[1])
		list := &ix.Pre // modprobe treats names before any "pre:"/"post:" as pre
		for _, w := range f[2:] {
			switch w {
			case "pre:":
				list = &ix.Pre
			case "post:":
				list = &ix.Post
			default:
				(*list)[mod] = append((*list)[mod], w)
			}
		}
		return nil
	})
}

func (ix *Index) parseAlias(r io.Reader) error {
	return eachLine(r, func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "alias" || strings.ContainsAny(f[1], "*?[") {
			return nil
		}
		ix.Aliases[f[1]] = append(ix.Aliases[f[1]], Name(f[2]))
		return nil
	})
}

func (ix *Index) parseBuiltin(r io.Reader) error {
	return eachLine(r, func(n int, line string) error {
		ix.Builtin[Name(line)] = true
		return nil
	})
}

func eachLine(r io.Reader, fn func(n int, line string) error) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	return s.Err()
}

// resolve maps a softdep word (a module name or an alias such as crypto-crc32c) to module names,
// sorted so the order does not depend on map iteration.
func (ix *Index) resolve(word string) []string {
	if _, ok := ix.ByName[Name(word)]; ok {
		return []string{Name(word)}
	}
	var names []string
	for _, n := range ix.Aliases[word] {
		if _, ok := ix.ByName[n]; ok { // built-in alias targets need no loading
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Closure returns the module paths needed to load names, in an order where every module comes after
// its dependencies and "pre" softdeps (and "post" softdeps right after it). Names built into the
// kernel are skipped; an unknown top-level name is an error, an unknown softdep is not (it is soft).
func (ix *Index) Closure(names []string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(mod string, chain []string) error
	visit = func(mod string, chain []string) error {
		switch state[mod] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("module dependency cycle: %s -> %s", strings.Join(chain, " -> "), mod)
		}
		state[mod] = 1
		chain = append(chain, Name(mod))
		for _, w := range ix.Pre[Name(mod)] {
			for _, n := range ix.resolve(w) {
				if err := visit(ix.ByName[n], chain); err != nil {
					return err
				}
			}
		}
		deps := ix.Deps[mod]
		// modules.dep lists the deepest dependency last; loading from the end keeps modprobe's order.
		for i := len(deps) - 1; i >= 0; i-- {
			if _, ok := ix.Deps[deps[i]]; !ok {
				return fmt.Errorf("module %s needs %s, which modules.dep does not list", mod, deps[i])
			}
			if err := visit(deps[i], chain); err != nil {
				return err
			}
		}
		state[mod] = 2
		order = append(order, mod)
		for _, w := range ix.Post[Name(mod)] {
			for _, n := range ix.resolve(w) {
				if err := visit(ix.ByName[n], chain); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, n := range names {
		mod, ok := ix.ByName[Name(n)]
		if !ok {
			if ix.Builtin[Name(n)] {
				continue
			}
			return nil, fmt.Errorf("module %s: not in modules.dep nor built in", n)
		}
		if err := visit(mod, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// DepFile renders modules.dep for the shipped subset, sorted by path. Every dependency of a shipped
// module is shipped (Closure guarantees it), so kmodule can probe any of them by name later.
func (ix *Index) DepFile(mods []string) []byte {
	sorted := append([]string(nil), mods...)
	sort.Strings(sorted)
	var b strings.Builder
	for _, m := range sorted {
		b.WriteString(m + ":")
		for _, d := range ix.Deps[m] {
			b.WriteString(" " + d)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// LoadList renders the load-order list: one module path per line, relative to /lib/modules/VERSION.
func LoadList(order []string) []byte {
	if len(order) == 0 {
		return []byte{}
	}
	return []byte(strings.Join(order, "\n") + "\n")
}

// FilterAliases keeps the lines of a modules.alias file whose module is shipped, so machined can match
// a device's modalias against the modules the image has (kmodule itself does not read aliases).
func FilterAliases(r io.Reader, mods []string) ([]byte, error) {
	shipped := map[string]bool{}
	for _, m := range mods {
		shipped[Name(m)] = true
	}
	var b strings.Builder
	err := eachLine(r, func(n int, line string) error {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "alias" && shipped[Name(f[2])] {
			b.WriteString(line + "\n")
		}
		return nil
	})
	return []byte(b.String()), err
}
