package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// Artifacts lists the files a build leaves in Out, in a fixed order.
var Artifacts = []string{Vmlinuz, Vmlinux, InitBin, RootImage, MachinedImage, Initramfs, UKIName, ISOName, RawName, UpgradeBundle}

// Sums returns the sha256 of each artifact present in dir.
func Sums(dir string) (map[string]string, error) {
	sums := map[string]string{}
	for _, name := range Artifacts {
		f, err := os.Open(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("hash %s: %w", name, err)
		}
		sums[name] = hex.EncodeToString(h.Sum(nil))
	}
	return sums, nil
}

// ReproCheck builds twice from the same inputs into two directories under work and fails unless
// every artifact is byte-identical. It prints the sums, and removes work when the builds match.
func ReproCheck(ctx context.Context, c Config, work string) error {
	var sums [2]map[string]string
	for i := range sums {
		c.Out = filepath.Join(work, fmt.Sprintf("build%d", i+1))
		if err := os.RemoveAll(c.Out); err != nil {
			return err
		}
		fmt.Fprintf(c.Log, "mkimage: repro-check: build %d of 2 into %s\n", i+1, c.Out)
		if err := Run(ctx, c); err != nil {
			return fmt.Errorf("build %d: %w", i+1, err)
		}
		s, err := Sums(c.Out)
		if err != nil {
			return err
		}
		sums[i] = s
	}
	var bad []string
	names := make([]string, 0, len(sums[0]))
	for n := range sums[0] {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		same := sums[0][n] == sums[1][n]
		mark := "identical"
		if !same {
			mark = "DIFFERENT " + sums[1][n]
			bad = append(bad, n)
		}
		fmt.Fprintf(c.Log, "mkimage: repro-check: %-20s %s %s\n", n, sums[0][n], mark)
	}
	if len(bad) > 0 {
		return fmt.Errorf("not reproducible: %v differ between %s and %s (kept for inspection)", bad, filepath.Join(work, "build1"), filepath.Join(work, "build2"))
	}
	return os.RemoveAll(work)
}

// diskUsage returns the bytes a file occupies on disk (less than its size when sparse).
func diskUsage(p string) (int64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, false
	}
	return st.Blocks * 512, true
}
