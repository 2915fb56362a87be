package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// needTools skips the test when a tool is missing, or fails it when CAIRN_REQUIRE_TOOLS=1 (as in CI), so
// a CI image that lacks a package cannot pass by skipping.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CAIRN_REQUIRE_TOOLS") == "1" {
				t.Fatalf("tool %s is required (CAIRN_REQUIRE_TOOLS=1) but not found: %v", n, err)
			}
			t.Skipf("tool %s not found; install it to run this test", n)
		}
	}
}

// run runs a tool and fails the test with its output when it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	runIn(t, "", nil, name, args...)
}

func runIn(t *testing.T, stdin string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		f := filepath.Join(t.TempDir(), "stdin")
		if err := os.WriteFile(f, []byte(stdin), 0o600); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		cmd.Stdin = in
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// sparseFile makes an empty file of the given size in the test's temp dir.
func sparseFile(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

// probeFile probes an image file.
func probeFile(t *testing.T, path string) []Signature {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sigs, err := Probe(f, st.Size())
	if err != nil {
		t.Fatalf("Probe(%s) error: %v", path, err)
	}
	return sigs
}
