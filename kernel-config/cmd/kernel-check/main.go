// Command kernel-check lists the options Cairn needs that a kernel config lacks, and exits 1 if any.
//
//	go run ./kernel-config/cmd/kernel-check [CONFIG]
//
// Without CONFIG it checks /boot/config-VERSION for the kernel the image ships: the version of
// _out/vmlinuz when it exists, else the newest /boot/config-*.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	kconfig "github.com/cairn-os/cairn/kernel-config"
)

func main() {
	path := ""
	if len(os.Args) > 1 {
		path = os.Args[1]
	} else {
		var err error
		if path, err = defaultConfig("_out/vmlinuz", "/boot"); err != nil {
			fatal(err)
		}
	}
	required, err := kconfig.Parse(strings.NewReader(kconfig.Fragment))
	if err != nil {
		fatal(fmt.Errorf("cairn.config: %w", err))
	}
	f, err := os.Open(path)
	if err != nil {
		fatal(err)
	}
	cfg, err := kconfig.Parse(f)
	f.Close()
	if err != nil {
		fatal(fmt.Errorf("%s: %w", path, err))
	}
	problems := kconfig.Check(required, cfg)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("kernel-check: %s: %d of %d required options missing or wrong\n", path, len(problems), len(required))
		os.Exit(1)
	}
	fmt.Printf("kernel-check: %s: all %d required options present\n", path, len(required))
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "kernel-check: %v\n", err)
	os.Exit(2)
}

// defaultConfig picks bootDir/config-VERSION for the shipped bzImage, or the newest config.
func defaultConfig(vmlinuz, bootDir string) (string, error) {
	if v, err := kconfig.BzImageRelease(vmlinuz); err == nil {
		return filepath.Join(bootDir, "config-"+v), nil
	}
	configs, _ := filepath.Glob(filepath.Join(bootDir, "config-*"))
	if len(configs) == 0 {
		return "", fmt.Errorf("no kernel config in %s and no %s: give CONFIG as an argument", bootDir, vmlinuz)
	}
	sort.Strings(configs)
	return configs[len(configs)-1], nil
}
