package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-os/cairn/image/bundle/internal/gocmd"
	"github.com/cairn-os/cairn/image/bundle/internal/images"
	"github.com/cairn-os/cairn/image/bundle/internal/pin"
	"github.com/cairn-os/cairn/image/bundle/internal/stamp"
	"github.com/cairn-os/cairn/image/bundle/internal/steps"
	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

type buildConfig struct {
	src, versions, out string
	force              bool
}

// libseccomp is what runc links statically; its exact bytes go into the stamp.
const libseccomp = "/usr/lib/x86_64-linux-gnu/libseccomp.a"

func build(ctx context.Context, c buildConfig) error {
	start := time.Now()
	v, err := versions.Load(c.versions)
	if err != nil {
		return err
	}
	if err := checkPins(c.src, v); err != nil {
		return err
	}
	goVersion, err := output(ctx, c.src, "go", "env", "GOVERSION", "GOOS", "GOARCH")
	if err != nil {
		return err
	}
	seccomp, err := fileSHA256(libseccomp)
	if err != nil {
		return fmt.Errorf("runc links libseccomp statically and %s is missing (apt-get install -y libseccomp-dev, or run hack/bundle/build.sh): %w", libseccomp, err)
	}
	// The netfilter tools layer is copied from this host's Debian: hash what
	// would be staged (paths, modes, contents of the tools, their libraries
	// and extensions), so that an upgrade of any of them rebuilds the bundle.
	hostTools := steps.HostTools(steps.Paths{Src: c.src}, "-digest")
	toolsDigest, err := gocmd.Output(ctx, hostTools.Dir, hostTools.Env, hostTools.Args...)
	if err != nil {
		return fmt.Errorf("hash the netfilter tools (hack/deps.sh bundle installs nftables and iptables): %w", err)
	}
	inputs, err := stamp.Hash(c.src, strings.Join(strings.Fields(string(goVersion)), " "), "libseccomp "+seccomp,
		"netfilter tools "+strings.TrimSpace(string(toolsDigest)))
	if err != nil {
		return err
	}
	if ok, why := stamp.UpToDate(c.out, inputs); ok && !c.force {
		progress("bundle up to date in %s (inputs %s)", c.out, inputs[:19])
		return nil
	} else if !c.force {
		progress("building: %s", why)
	}

	buildDate, err := gocmd.ModuleTime(ctx, filepath.Join(c.src, "kube"), "k8s.io/kubernetes")
	if err != nil {
		return err
	}
	// A failed or interrupted build must not look up to date.
	for _, stale := range []string{stamp.FileName, "bin", "cni", "images.tar", "images.txt"} {
		if err := os.RemoveAll(filepath.Join(c.out, stale)); err != nil {
			return fmt.Errorf("clear old output: %w", err)
		}
	}
	for _, d := range []string{"bin", "cni"} {
		if err := os.MkdirAll(filepath.Join(c.out, d), 0o755); err != nil {
			return fmt.Errorf("create output dir: %w", err)
		}
	}
	neutral, err := os.MkdirTemp("", "cairn-bundle-")
	if err != nil {
		return fmt.Errorf("create scratch dir: %w", err)
	}
	defer os.RemoveAll(neutral)
	staging, err := os.MkdirTemp("", "cairn-hosttools-")
	if err != nil {
		return fmt.Errorf("create scratch dir: %w", err)
	}
	defer os.RemoveAll(staging)
	netfilter := filepath.Join(staging, "root")

	plan := steps.Plan(v, steps.Paths{Src: c.src, Out: c.out, Neutral: neutral, HostTools: netfilter}, steps.Inputs{KubeBuildDate: buildDate})
	var outputs []string
	for i, s := range plan {
		progress("[%d/%d] %s: %s", i+1, len(plan)+1, s.Name, describe(s, v))
		res, err := run(ctx, s.Name, s.Dir, s.Env, s.Args...)
		if err != nil {
			return err
		}
		for _, l := range s.Links {
			if err := os.Symlink(l.Target, filepath.Join(c.out, l.Name)); err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		progress("[%d/%d] %s: done in %s, peak RSS %s", i+1, len(plan)+1, s.Name, res.Took.Round(100*time.Millisecond), mib(res.PeakRSS))
		outputs = append(outputs, s.Outputs...)
	}

	progress("[%d/%d] images: writing images.tar", len(plan)+1, len(plan)+1)
	t := time.Now()
	written, err := writeImages(c.out, netfilter, v)
	if err != nil {
		return err
	}
	progress("[%d/%d] images: done in %s", len(plan)+1, len(plan)+1, time.Since(t).Round(100*time.Millisecond))
	outputs = append(outputs, "images.tar", "images.txt")

	if err := stamp.Write(c.out, inputs, outputs); err != nil {
		return err
	}
	report(c.out, outputs, written)
	progress("bundle built in %s", time.Since(start).Round(time.Second))
	return nil
}

func describe(s steps.Step, v versions.Versions) string {
	switch s.Name {
	case "kube":
		return "Kubernetes " + v.Kubernetes + ", CoreDNS " + v.CoreDNS + " and flanneld " + v.Flannel + " multi-call binary (a cold build takes minutes)"
	case "etcd":
		return "etcd " + v.Etcd
	case "hosttools":
		return "stage nft and iptables with their libraries for the kube-proxy and flannel images"
	case "containerd":
		return "containerd " + v.Containerd + " multi-call binary (daemon and runc shim)"
	case "ctr":
		return "ctr " + v.Containerd + " (tests only)"
	case "runc":
		return "runc " + v.Runc + " (static PIE, seccomp)"
	case "cni":
		return "CNI plugins " + v.CNIPlugins
	}
	return strings.Join(s.Outputs, " ")
}

// writeImages builds every image from the fresh binaries and the staged
// netfilter tools, and writes images.tar (atomically) and images.txt.
func writeImages(out, netfilter string, v versions.Versions) ([]images.Written, error) {
	bins := images.Binaries{}
	for _, name := range images.BinaryNames {
		b, err := os.ReadFile(filepath.Join(out, "bin", name))
		if err != nil {
			return nil, fmt.Errorf("read binary for images: %w", err)
		}
		bins[name] = b
	}
	nf, err := images.DirFiles(netfilter)
	if err != nil {
		return nil, err
	}
	imgs, err := images.Bundle(v, bins, nf)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(out, "images.tar.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("create images.tar: %w", err)
	}
	written, err := images.WriteArchive(f, imgs)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close images.tar: %w", cerr)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(out, "images.tar")); err != nil {
		return nil, fmt.Errorf("write images.tar: %w", err)
	}
	var list bytes.Buffer
	for _, w := range written {
		fmt.Fprintf(&list, "%s %s\n", w.Name, w.Digest)
	}
	if err := os.WriteFile(filepath.Join(out, "images.txt"), list.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("write images.txt: %w", err)
	}
	return written, nil
}

func report(out string, outputs []string, written []images.Written) {
	progress("outputs in %s:", out)
	for _, o := range outputs {
		if target, err := os.Readlink(filepath.Join(out, o)); err == nil {
			progress("  %-32s -> %s", o, target)
		} else if fi, err := os.Stat(filepath.Join(out, o)); err == nil {
			progress("  %-32s %10s", o, mib(fi.Size()))
		}
	}
	progress("images (manifest digest, size with shared layers counted in full):")
	for _, w := range written {
		progress("  %-48s %s %10s", w.Name, w.Digest.String()[:19], mib(w.Size))
	}
	if sum, err := fileSHA256(filepath.Join(out, "images.tar")); err == nil {
		progress("images.tar sha256:%s", sum)
	}
}

// checkPins refuses to build when a wrapper's go.mod (kube/, etcd/,
// containerd/) drifted from versions.env: the binaries would not be the
// versions the images claim.
func checkPins(src string, v versions.Versions) error {
	for _, w := range []struct {
		dir   string
		check func([]byte, versions.Versions) error
	}{{"kube", pin.CheckKube}, {"etcd", pin.CheckEtcd}, {"containerd", pin.CheckContainerd}} {
		gomod, err := os.ReadFile(filepath.Join(src, w.dir, "go.mod"))
		if err != nil {
			return fmt.Errorf("read %s wrapper module: %w", w.dir, err)
		}
		if err := w.check(gomod, v); err != nil {
			return fmt.Errorf("%w (run `go run ./cmd/bundle pin` in image/bundle)", err)
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
