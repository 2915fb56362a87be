//go:build integration

package kube

// These tests run the rendered command lines and configs through the real programs of the built bundle
// (`make bundle`, _out/bundle): a flag that Kubernetes 1.37 or etcd 3.6 no longer knows, a kubelet
// config field it rejects or a containerd key in the wrong table fails here, not on a booting node.
// They skip when the bundle has not been built.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/paths"
)

func bundleDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "_out", "bundle"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "kube")); err != nil {
		t.Skipf("no built bundle in %s (make bundle): %v", dir, err)
	}
	return dir
}

func run(t *testing.T, timeout time.Duration, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// Each component parses its whole rendered command line; --help then exits 0 instead of starting it.
func TestComponentFlagsKnown(t *testing.T) {
	bin := filepath.Join(bundleDir(t), "bin")
	r := newTestRenderer(t)
	for _, pod := range []struct {
		name string
		cmd  []string
	}{
		{KubeAPIServer, r.APIServerPod().Spec.Containers[0].Command},
		{KubeControllerManager, r.ControllerManagerPod().Spec.Containers[0].Command},
		{KubeScheduler, r.SchedulerPod().Spec.Containers[0].Command},
		{Etcd, r.EtcdPod(EtcdOptions{}).Spec.Containers[0].Command},
	} {
		t.Run(pod.name, func(t *testing.T) {
			prog, args := filepath.Join(bin, "kube"), append([]string(nil), pod.cmd...)
			if pod.name == Etcd {
				prog, args = filepath.Join(bin, "etcd"), args[1:]
			}
			out, err := run(t, 30*time.Second, prog, append(args, "--help")...)
			if err != nil {
				t.Errorf("%s %s --help: %v\n%s", pod.name, strings.Join(args, " "), err, tail(out))
			}
		})
	}
	t.Run("kubelet", func(t *testing.T) {
		args := r.KubeletArgs(KubeletOptions{Bootstrap: true})
		out, err := run(t, 30*time.Second, filepath.Join(bin, "kube"), append([]string{"kubelet"}, append(args, "--help")...)...)
		if err != nil {
			t.Errorf("kubelet %s --help: %v\n%s", strings.Join(args, " "), err, tail(out))
		}
	})
}

// The kubelet loads, defaults and validates the rendered config, then stops at the missing kubeconfig:
// everything before that point (including the config) was accepted.
func TestKubeletAcceptsConfig(t *testing.T) {
	bin := filepath.Join(bundleDir(t), "bin")
	root := t.TempDir()
	r, err := New(testConfig(t), testNode, paths.Paths{Root: root}, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := r.KubeletConfig(KubeletOptions{AllowCgroupV1: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(Files{cfg}); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"kubelet"}, r.KubeletArgs(KubeletOptions{})...)
	out, err := run(t, 60*time.Second, filepath.Join(bin, "kube"), args...)
	if err == nil {
		t.Fatalf("kubelet ran without a kubeconfig; want it to stop at loading one")
	}
	if !strings.Contains(out, "unable to load kubeconfig") {
		t.Errorf("kubelet stopped before loading its kubeconfig (a config or flag problem?):\n%s", tail(out))
	}
}

// containerd 2.4 loads the rendered config with its CRI plugins and serves on the rendered socket.
func TestContainerdLoadsConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	bundle := bundleDir(t)
	// A short directory: the socket path must fit the 108 bytes of a unix socket address.
	root, err := os.MkdirTemp("", "kz-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	r, err := New(testConfig(t), testNode, paths.Paths{Root: root}, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	f, err := r.ContainerdConfig(ContainerdOptions{RestrictOOMScoreAdj: true, CNIBinDir: filepath.Join(bundle, "cni")})
	if err != nil {
		t.Fatal(err)
	}
	cni, err := r.CNIConfig("10.244.7.0/24", CNIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(Files{f, cni}); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(root, "containerd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(bundle, "bin", "containerd"), "--config", f.Path)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(bundle, "bin")+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start containerd: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})

	ctr := filepath.Join(bundle, "bin", "ctr")
	sock := r.Layout().ContainerdSocket()
	var plugins string
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := run(t, 10*time.Second, ctr, "--address", sock, "plugins", "ls")
		if err == nil {
			plugins = out
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("containerd did not answer on %s within 30s: %v\n%s", sock, err, tail(string(log)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{"io.containerd.cri.v1 images", "io.containerd.cri.v1 runtime", "io.containerd.grpc.v1 cri"} {
		f := strings.Fields(want)
		if !pluginOK(plugins, f[0], f[1]) {
			t.Errorf("plugin %s is not ok:\n%s", want, plugins)
		}
	}
	if log, _ := os.ReadFile(logPath); strings.Contains(string(log), "migrated") {
		t.Errorf("containerd migrated the config (an old version number?):\n%s", tail(string(log)))
	}
}

func pluginOK(list, typ, id string) bool {
	for _, l := range strings.Split(list, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[0] == typ && f[1] == id && f[len(f)-1] == "ok" {
			return true
		}
	}
	return false
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
