// Package dispatch decides which Kubernetes component the multi-call `kube`
// binary runs. It is kept apart from main so it can be tested without
// compiling Kubernetes.
package dispatch

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Resolve picks a component from argv and returns the argv that component
// must see. The name comes from basename(argv[0]) (a symlink such as
// /usr/local/bin/kube-apiserver -> kube) or, failing that, from argv[1]
// (`kube kubelet --version`). The returned argv always starts with the
// component name, because cobra and klog read os.Args[0] for help and logs.
func Resolve(argv []string, known []string) (string, []string, error) {
	if len(argv) == 0 {
		return "", nil, fmt.Errorf("empty argv: %s", usage(known))
	}
	if base := filepath.Base(argv[0]); slices.Contains(known, base) {
		return base, append([]string{base}, argv[1:]...), nil
	}
	if len(argv) > 1 && slices.Contains(known, argv[1]) {
		return argv[1], append([]string{argv[1]}, argv[2:]...), nil
	}
	if len(argv) > 1 {
		return "", nil, fmt.Errorf("unknown component %q: %s", argv[1], usage(known))
	}
	return "", nil, fmt.Errorf("no component given: %s", usage(known))
}

func usage(known []string) string {
	sorted := slices.Sorted(slices.Values(known))
	return "usage: kube COMPONENT [flags...] (or call it through a symlink named COMPONENT); components: " +
		strings.Join(sorted, ", ")
}
