package rootfs

import (
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/payload"

	"github.com/cairn-os/cairn/image/internal/tree"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func listing(t *tree.Tree) string {
	var b strings.Builder
	for _, e := range t.Entries() {
		kind := map[tree.Kind]string{tree.Dir: "d", tree.File: "f", tree.Symlink: "l", tree.CharDev: "c"}[e.Kind]
		fmt.Fprintf(&b, "%s %04o %s", kind, e.Perm, e.Path)
		if e.Kind == tree.Symlink {
			b.WriteString(" -> " + e.Link)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestBuildLayout(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(rel), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("modules/kernel/fs/xfs/xfs.ko")
	write("modules/kernel/net/ipv4/ipip.ko")
	write("modules/modules.builtin")
	tr, notes, err := Build(Config{
		Version:       "v0.1.0",
		KernelVersion: "6.1.0-test",
		ModulesDir:    filepath.Join(dir, "modules"),
		Modules:       []string{"kernel/fs/xfs/xfs.ko"},
		Requested:     []string{"kernel/net/ipv4/ipip.ko"},
		DepFile:       []byte("kernel/fs/xfs/xfs.ko:\nkernel/net/ipv4/ipip.ko:\n"),
		PayloadSum:    strings.Repeat("ab", 32),
		HostRoot:      "/",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 0 {
		t.Errorf("Build() notes = %v, want none with a payload", notes)
	}
	// The boot loads only the load list: a module shipped for the kernel's requests waits for one.
	for _, e := range tr.Entries() {
		if strings.HasSuffix(e.Path, "/"+LoadListName) && string(e.Data) != "kernel/fs/xfs/xfs.ko\n" {
			t.Errorf("%s = %q, want only the load list's module", e.Path, e.Data)
		}
	}
	got := listing(tr)
	p := filepath.Join("testdata", "rootfs.golden")
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Build() layout (-want +got):\n%s", diff)
	}
}

// machined travels in an image of its own, which init mounts where the root image's link points.
func TestMachinedImage(t *testing.T) {
	m := filepath.Join(t.TempDir(), "machined")
	if err := os.WriteFile(m, []byte("the agent"), 0o644); err != nil {
		t.Fatal(err)
	}
	mt, err := MachinedTree(m)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listing(mt), "d 0755 /\nf 0755 /machined\n"; got != want {
		t.Errorf("MachinedTree() = %q, want %q", got, want)
	}
	root, _, err := Build(Config{KernelVersion: "v", ModulesDir: t.TempDir(), HostRoot: "/"})
	if err != nil {
		t.Fatal(err)
	}
	var link string
	for _, e := range root.Entries() {
		if e.Path == "/usr/sbin/machined" {
			link = e.Link
		}
	}
	if got := path.Join("/usr/sbin", link); got != MachinedDir+"/"+MachinedBin || !root.Has(MachinedDir) {
		t.Errorf("root image's /usr/sbin/machined leads to %q (mount point there: %v), want %s/%s", got, root.Has(MachinedDir), MachinedDir, MachinedBin)
	}
}

func TestBuildWithoutPayloadSaysSo(t *testing.T) {
	tr, notes, err := Build(Config{KernelVersion: "v", ModulesDir: t.TempDir(), HostRoot: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "no Kubernetes payload") {
		t.Errorf("Build() notes = %q, want one saying there is no Kubernetes payload", notes)
	}
	if tr.Has(payload.SumFile) {
		t.Errorf("Build() without a payload records a payload checksum")
	}
}

func TestToolsShipWithTheirLibraries(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/mkfs.xfs"); err != nil {
		t.Skip("xfsprogs not installed")
	}
	b, err := ResolveELF("/", "/usr/sbin/mkfs.xfs")
	if err != nil {
		t.Fatal(err)
	}
	if b.Interp != "/lib64/ld-linux-x86-64.so.2" {
		t.Errorf("mkfs.xfs interpreter = %q, want /lib64/ld-linux-x86-64.so.2", b.Interp)
	}
	if _, ok := b.Libs["libc.so.6"]; !ok {
		t.Errorf("mkfs.xfs libraries %v lack libc.so.6", b.Sonames())
	}
	tr, _, err := Build(Config{KernelVersion: "v", ModulesDir: t.TempDir(), HostRoot: "/",
		Tools: []string{"/usr/sbin/mkfs.xfs", "/usr/sbin/mke2fs"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/usr/sbin/mkfs.xfs", "/usr/sbin/mkfs.ext4", "/usr/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if !tr.Has(p) {
			t.Errorf("root image lacks %s", p)
		}
	}
}

// Tools is the same code the root image uses, so the bundle's netfilter layer and the node's
// /usr/sbin hold the same files: every path of Tools (but "/") is in a root image built with the
// same tools, with the same kind, mode and link target.
func TestToolsIsTheRootImageLayout(t *testing.T) {
	tools := []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/nft"}
	for _, tool := range tools {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("%s not installed (hack/deps.sh bundle)", tool)
		}
	}
	got, err := Tools("/", tools)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/lib64", "/usr/lib64/ld-linux-x86-64.so.2", "/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/usr/sbin/nft", "/usr/sbin/iptables", "/usr/sbin/ip6tables-restore",
		"/usr/lib/x86_64-linux-gnu/libnftables.so.1", "/usr/lib/x86_64-linux-gnu/xtables/libxt_MASQUERADE.so",
	} {
		if !got.Has(p) {
			t.Errorf("Tools() lacks %s", p)
		}
	}
	root, _, err := Build(Config{KernelVersion: "v", ModulesDir: t.TempDir(), HostRoot: "/", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]tree.Entry{}
	for _, e := range root.Entries() {
		in[e.Path] = e
	}
	for _, e := range got.Entries() {
		r, ok := in[e.Path]
		if !ok || r.Kind != e.Kind || r.Perm != e.Perm || r.Link != e.Link || r.Src != e.Src {
			t.Errorf("Tools() entry %+v, root image has %+v", e, r)
		}
	}
}
