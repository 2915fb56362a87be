//go:build integration

package kube

// TestKubeletContainerPropagation runs the kubelet image through the bundle's containerd and runc with
// the rendered spec (every mount, the host namespaces, privileged, rootfs propagation) and has it mount
// a tmpfs under /var/lib/kubelet, as the kubelet does for every secret volume. The mount must show up
// outside the container, where containerd would bind it into a pod. containerd runs in a private mount
// namespace with its own /run, so nothing of it reaches the host.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
)

func TestKubeletContainerPropagation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run containerd")
	}
	bundle := bundleDir(t)
	root, err := os.MkdirTemp("", "kp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	r, err := New(testConfig(t), testNode, paths.Paths{Root: root}, DefaultImages())
	if err != nil {
		t.Fatal(err)
	}
	l := r.Layout()
	cfg, err := r.ContainerdConfig(ContainerdOptions{RestrictOOMScoreAdj: true, CNIBinDir: filepath.Join(bundle, "cni")})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFiles(Files{cfg, {Path: l.ResolvConf(), Data: []byte("nameserver 127.0.0.1\n"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(l.KubeletDir(), "pods", "probe", "volume")
	for _, d := range []string{probe, l.Kubernetes(), l.Log()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The node's side of the contract: /var/lib/kubelet is a shared mount (machined does the same).
	script := fmt.Sprintf(`set -e
mount -t tmpfs tmpfs /run
mount --bind %[1]s %[1]s
mount --make-rshared %[1]s
exec %[2]s --config %[3]s`, l.KubeletDir(), filepath.Join(bundle, "bin", "containerd"), cfg.Path)
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(bundle, "bin")+":"+os.Getenv("PATH"))
	startProcess(t, cmd, filepath.Join(root, "containerd.log"))

	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), "cairn-test"), 2*time.Minute)
	defer cancel()
	var cli *client.Client
	for deadline := time.Now().Add(30 * time.Second); ; {
		if cli, err = client.New(l.ContainerdSocket()); err == nil {
			if _, err = cli.Version(ctx); err == nil {
				break
			}
			cli.Close()
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(root, "containerd.log"))
			t.Fatalf("containerd did not answer: %v\n%s", err, tail(string(log)))
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer cli.Close()

	start := time.Now()
	archive, err := os.Open(filepath.Join(bundle, "images.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer archive.Close()
	if _, err := cli.Import(ctx, archive); err != nil {
		t.Fatalf("import images.tar: %v", err)
	}
	c := r.KubeletContainer(KubeletOptions{})
	img, err := cli.GetImage(ctx, c.Image)
	if err != nil {
		t.Fatalf("image %s: %v", c.Image, err)
	}
	if err := img.Unpack(ctx, "overlayfs"); err != nil {
		t.Fatalf("unpack %s: %v", c.Image, err)
	}
	t.Logf("imported and unpacked %s in %v", c.Image, time.Since(start).Round(time.Millisecond))

	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	ctr, err := cli.NewContainer(ctx, "kubelet-probe",
		client.WithImage(img), client.WithNewSnapshot("kubelet-probe", img),
		client.WithNewSpec(oci.WithImageConfig(img), c.SpecOpts(exists),
			oci.WithProcessArgs("/usr/bin/mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe)))
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	defer ctr.Delete(context.WithoutCancel(ctx), client.WithSnapshotCleanup)
	out := &strings.Builder{}
	// The fifos live under root: containerd's shim sees its own /run, not the host's.
	task, err := ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(root, "fifo"))))
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(root, "containerd.log"))
		t.Fatalf("create task (runc refused the spec?): %v\n%s", err, tail(string(log)))
	}
	defer task.Delete(context.WithoutCancel(ctx), client.WithProcessKill)
	exit, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatalf("start task: %v", err)
	}
	st := <-exit
	if code, _, err := st.Result(); err != nil || code != 0 {
		t.Fatalf("mount in the kubelet container: status %d, %v\n%s", code, err, out)
	}

	// The tmpfs is visible in containerd's mount namespace: the "host" of this test.
	if !mountedIn(t, cmd.Process.Pid, probe, "tmpfs") {
		t.Errorf("the kubelet container's tmpfs on %s did not propagate to the host (rshared /var/lib/kubelet, shared rootfs)", probe)
	}
}

// mountedIn reports whether pid's mount namespace has a mount of fstype at target. pid is the unshare
// process, which exec'ed containerd.
func mountedIn(t *testing.T, pid int, target, fstype string) bool {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[4] != target {
			continue
		}
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == fstype {
				return true
			}
		}
	}
	return false
}
