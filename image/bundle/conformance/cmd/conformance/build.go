package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-os/cairn/image/bundle/conformance/testimages"
	"github.com/cairn-os/cairn/image/bundle/internal/gocmd"
	"github.com/cairn-os/cairn/image/bundle/internal/images"
	"github.com/cairn-os/cairn/image/bundle/internal/stamp"
	"github.com/cairn-os/cairn/image/bundle/internal/steps"
	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

// hostPrograms are the Debian programs the test images carry (hack/deps.sh conformance installs them).
var hostPrograms = []string{"/usr/bin/bash", "/usr/bin/nc.openbsd", "/usr/bin/dig", "/usr/bin/getent", "/usr/bin/curl", "/usr/sbin/nginx"}

const busyboxPath = "/bin/busybox"

// binaries are the Go programs built from the pinned modules, by output name.
var binaries = []struct{ name, pkg string }{
	{"agnhost", "k8s.io/kubernetes/test/images/agnhost"},
	{"nonewprivs", "k8s.io/kubernetes/test/images/nonewprivs"},
	{"sample-apiserver", "k8s.io/sample-apiserver"},
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	out := fs.String("out", "_out/conformance", "output directory")
	bundle := fs.String("bundle", "_out/bundle", "the node's bundle (its etcd goes into the etcd image)")
	force := fs.Bool("force", false, "rebuild even when the stamp says the outputs are up to date")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src, err := os.Getwd() // the conformance module: `go run ./cmd/conformance` runs here
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(src, "suite", "suite_test.go")); err != nil {
		return fmt.Errorf("run from image/bundle/conformance (the module's directory): %w", err)
	}
	if *out, err = filepath.Abs(*out); err != nil {
		return err
	}
	if *bundle, err = filepath.Abs(*bundle); err != nil {
		return err
	}
	v, err := versions.Load(filepath.Join(src, "..", "versions.env"))
	if err != nil {
		return err
	}
	if err := checkPinned(ctx, src, v.Kubernetes); err != nil {
		return err
	}

	etcdBin := filepath.Join(*bundle, "bin", "etcd")
	inputs, err := inputsHash(ctx, src, etcdBin)
	if err != nil {
		return err
	}
	if ok, why := stamp.UpToDate(*out, inputs); ok && !*force {
		progress("up to date in %s (inputs %s)", *out, inputs[:19])
		return nil
	} else if !*force {
		progress("building: %s", why)
	}
	for _, stale := range []string{stamp.FileName, "bin", "images.tar", "images.txt"} {
		if err := os.RemoveAll(filepath.Join(*out, stale)); err != nil {
			return err
		}
	}
	bin := filepath.Join(*out, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}

	date, err := gocmd.ModuleTime(ctx, src, "k8s.io/kubernetes")
	if err != nil {
		return err
	}
	ldflags := "-s -w " + steps.KubeVersionFlags(v, steps.Inputs{KubeBuildDate: date})
	goCmds := [][]string{
		{"go", "test", "-c", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(bin, "e2e.test"), "./suite"},
		{"go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(bin, "ginkgo"), "github.com/onsi/ginkgo/v2/ginkgo"},
	}
	for _, b := range binaries {
		goCmds = append(goCmds, []string{"go", "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(bin, b.name), b.pkg})
	}
	for i, argv := range goCmds {
		progress("[%d/%d] %s", i+1, len(goCmds)+2, argv[len(argv)-1])
		if _, err := gocmd.Run(ctx, src, []string{"CGO_ENABLED=0"}, alive, argv...); err != nil {
			return err
		}
	}

	progress("[%d/%d] staging %s with their libraries", len(goCmds)+1, len(goCmds)+2, strings.Join(hostPrograms, " "))
	staging, err := os.MkdirTemp("", "cairn-conformance-tools-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	tree := filepath.Join(staging, "root")
	hostArgs := append([]string{"go", "run", "./image/cmd/hosttools", "-out", tree, "-host-root", "/"}, hostPrograms...)
	if _, err := gocmd.Run(ctx, filepath.Join(src, "..", "..", ".."), []string{"CGO_ENABLED=0"}, alive, hostArgs...); err != nil {
		return err
	}

	progress("[%d/%d] images", len(goCmds)+2, len(goCmds)+2)
	in, err := loadInputs(bin, etcdBin, tree, v.Etcd)
	if err != nil {
		return err
	}
	imgs, err := testimages.Build(in)
	if err != nil {
		return err
	}
	written, err := writeArchive(filepath.Join(*out, "images.tar"), imgs)
	if err != nil {
		return err
	}
	var list bytes.Buffer
	for _, w := range written {
		fmt.Fprintf(&list, "%s %s\n", w.Name, w.Digest)
		progress("    %s", w.Name)
	}
	if err := os.WriteFile(filepath.Join(*out, "images.txt"), list.Bytes(), 0o644); err != nil {
		return err
	}
	outputs := []string{"bin/e2e.test", "bin/ginkgo", "images.tar", "images.txt"}
	for _, b := range binaries {
		outputs = append(outputs, "bin/"+b.name)
	}
	if err := stamp.Write(*out, inputs, outputs); err != nil {
		return err
	}
	progress("done: %s (%d images)", *out, len(written))
	return nil
}

// checkPinned refuses to build a suite from another Kubernetes than the node runs.
func checkPinned(ctx context.Context, src, want string) error {
	b, err := gocmd.Output(ctx, src, nil, "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes")
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(string(b)); got != want {
		return fmt.Errorf("image/bundle/conformance/go.mod requires k8s.io/kubernetes %s, versions.env pins %s: change go.mod to match", got, want)
	}
	return nil
}

// inputsHash covers the module's sources, the toolchain, the node's etcd, busybox and the host programs
// with their libraries (hosttools -digest), so a Debian upgrade rebuilds the images.
func inputsHash(ctx context.Context, src, etcdBin string) (string, error) {
	goVersion, err := gocmd.Output(ctx, src, nil, "go", "env", "GOVERSION")
	if err != nil {
		return "", err
	}
	fileHash := func(p string) (string, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("%w (make bundle; hack/deps.sh conformance)", err)
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:]), nil
	}
	etcd, err := fileHash(etcdBin)
	if err != nil {
		return "", err
	}
	busybox, err := fileHash(busyboxPath)
	if err != nil {
		return "", err
	}
	digestArgs := append([]string{"go", "run", "./image/cmd/hosttools", "-digest", "-host-root", "/"}, hostPrograms...)
	tools, err := gocmd.Output(ctx, filepath.Join(src, "..", "..", ".."), nil, digestArgs...)
	if err != nil {
		return "", err
	}
	return stamp.Hash(src, strings.TrimSpace(string(goVersion)), "etcd "+etcd, "busybox "+busybox,
		"tools "+strings.TrimSpace(string(tools)))
}

func loadInputs(bin, etcdBin, tree, etcdVersion string) (testimages.Inputs, error) {
	read := func(p string) []byte {
		b, _ := os.ReadFile(p)
		return b
	}
	in := testimages.Inputs{
		Agnhost:         read(filepath.Join(bin, "agnhost")),
		Nonewprivs:      read(filepath.Join(bin, "nonewprivs")),
		SampleAPIServer: read(filepath.Join(bin, "sample-apiserver")),
		Etcd:            read(etcdBin),
		EtcdVersion:     etcdVersion,
		Busybox:         read(busyboxPath),
	}
	applets, err := exec.Command(busyboxPath, "--list-full").Output()
	if err != nil {
		return in, fmt.Errorf("%s --list-full: %w", busyboxPath, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(applets))
	for sc.Scan() {
		in.BusyboxApplets = append(in.BusyboxApplets, sc.Text())
	}
	if in.Tools, err = images.DirFiles(tree); err != nil {
		return in, err
	}
	k8s, err := moduleDir("k8s.io/kubernetes")
	if err != nil {
		return in, err
	}
	in.Sources = func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(k8s, "test", "images", filepath.FromSlash(name)))
	}
	return in, nil
}

func writeArchive(path string, imgs []images.Named) ([]images.Written, error) {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(path + ".tmp")
	w := bufio.NewWriterSize(f, 1<<20)
	written, err := images.WriteArchive(w, imgs)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return written, os.Rename(path+".tmp", path)
}

func moduleDir(mod string) (string, error) {
	b, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", mod, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func alive(d time.Duration) { progress("    still building (%s)", d.Round(time.Second)) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "conformance: "+format+"\n", args...)
}
