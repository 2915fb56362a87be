package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/image/internal/tree"
)

func TestDigestChangesWithContentModeAndLinks(t *testing.T) {
	build := func(content string, perm os.FileMode, link string) string {
		t.Helper()
		tr := tree.New()
		if err := tr.Bytes("/usr/sbin/nft", []byte(content), perm); err != nil {
			t.Fatal(err)
		}
		if err := tr.Link("/lib64", link); err != nil {
			t.Fatal(err)
		}
		d, err := Digest(tr)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := build("v1", 0o755, "usr/lib64")
	if again := build("v1", 0o755, "usr/lib64"); again != base {
		t.Errorf("Digest() of the same tree = %s then %s, want equal", base, again)
	}
	for name, d := range map[string]string{
		"content": build("v2", 0o755, "usr/lib64"),
		"mode":    build("v1", 0o700, "usr/lib64"),
		"link":    build("v1", 0o755, "usr/lib"),
	} {
		if d == base {
			t.Errorf("Digest() unchanged after a %s change", name)
		}
	}
}

func TestRunStagesAndPrintsDigest(t *testing.T) {
	tool := "/usr/sbin/xtables-nft-multi"
	if _, err := os.Stat(tool); err != nil {
		t.Skipf("%s not installed (hack/deps.sh bundle)", tool)
	}
	out := filepath.Join(t.TempDir(), "stage")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-out", out, "-digest", tool}, &stdout, &stderr); err != nil {
		t.Fatalf("run() error = %v (stderr %s)", err, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "sha256:") {
		t.Errorf("run() printed %q, want a digest", stdout.String())
	}
	for _, p := range []string{"usr/sbin/xtables-nft-multi", "usr/sbin/iptables", "lib64", "usr/lib64/ld-linux-x86-64.so.2", "usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Lstat(filepath.Join(out, p)); err != nil {
			t.Errorf("staged tree lacks %s: %v", p, err)
		}
	}
	// Staging reads the same tree the digest hashed: digest-only gives the same answer.
	var again bytes.Buffer
	if err := run([]string{"-digest", tool}, &again, &stderr); err != nil {
		t.Fatal(err)
	}
	if again.String() != stdout.String() {
		t.Errorf("-digest alone = %q, with -out = %q", again.String(), stdout.String())
	}
}

func TestRunUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"-out", "x"}, {"/usr/sbin/nft"}, {"-bogus"}} {
		if err := run(args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, errUsage) {
			t.Errorf("run(%q) error = %v, want usage", args, err)
		}
	}
}
