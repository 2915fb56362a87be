package main

import (
	"fmt"
	"path"
	"strings"
)

// moduleEntry is one line of the load list: a path relative to /lib/modules/RELEASE, then optional
// module parameters.
type moduleEntry struct {
	path   string
	params string
}

// parseModuleList reads the builder's load list. Lines are already in load order (dependencies
// first); blank lines and # comments are skipped. Paths must stay inside the modules directory.
func parseModuleList(text string) ([]moduleEntry, error) {
	var out []moduleEntry
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p, params, _ := strings.Cut(line, " ")
		if path.IsAbs(p) || strings.HasPrefix(path.Clean(p), "..") || !strings.Contains(path.Base(p), ".ko") {
			return nil, fmt.Errorf("line %d: %q is not a module path relative to the modules directory", i+1, p)
		}
		out = append(out, moduleEntry{path: path.Clean(p), params: strings.TrimSpace(params)})
	}
	return out, nil
}
