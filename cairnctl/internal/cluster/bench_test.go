//go:build bench

package cluster

// The figures of `make bench` (hack/bench/bench.sh). They live here, not in hack/bench, because they
// boot VMs with the launcher and the boot code of cluster create, which Go's internal rule keeps inside
// cairnctl/. They print and never assert a time.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// benchRuns is how many boots each boot figure is made of ($CAIRN_BENCH_RUNS, default 5).
func benchRuns() int {
	if n, err := strconv.Atoi(os.Getenv("CAIRN_BENCH_RUNS")); err == nil && n > 0 {
		return n
	}
	return 5
}

func TestBench(t *testing.T) {
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("CAIRN_IMAGE_DIR")
	if out == "" {
		out = filepath.Join(repo, "_out")
	}
	img, err := FindArtifacts(out, qemu.ModeVmlinux)
	if err != nil {
		t.Fatal(err)
	}
	printMachine()
	printSizes(out)
	fmt.Println()

	runs := benchRuns()
	var real []time.Duration
	var lastVM *qemu.VM
	var last NodeState
	var fp string
	for i := 0; i < runs; i++ {
		vm, ns, b := bootReal(t, img)
		real = append(real, b.API)
		fmt.Printf("  cairn boot %d/%d: network %.2fs, first Status %.2fs\n", i+1, runs, b.Network.Seconds(), b.API.Seconds())
		if i < runs-1 {
			vm.Stop()
			continue
		}
		lastVM, last, fp = vm, ns, b.Fingerprint
	}
	printFigure("boot to first Status, Cairn (vmlinux, microvm, 2 vCPU, 2 GiB)", real)
	apiLatency(t, last, fp)
	if os.Getenv("CAIRN_BENCH_INIT") != "0" {
		initToRunning(t, last, fp)
	}
	lastVM.Stop()
	fmt.Println()

	fake := buildFakeImage(t, repo)
	var bare []time.Duration
	for i := 0; i < runs; i++ {
		d := bootFake(t, fake, i)
		bare = append(bare, d)
		fmt.Printf("  kernel + trivial init boot %d/%d: first answer %.2fs\n", i+1, runs, d.Seconds())
	}
	printFigure(fmt.Sprintf("boot to first answer, kernel + trivial init (same kernel, modules and network; initramfs %.0f MiB, Cairn's %.0f MiB)",
		sizeMiB(filepath.Join(fake, "initramfs.cpio.zst")), sizeMiB(img.Initramfs)), bare)
	fmt.Printf("  => Cairn adds %.2fs (medians) on top of the kernel and a trivial init\n\n", (median(real) - median(bare)).Seconds())

}

// bootReal boots the real image with cluster create's disks and waits for its maintenance API.
func bootReal(t *testing.T, img Artifacts) (*qemu.VM, NodeState, *Boot) {
	t.Helper()
	dir := t.TempDir()
	// The node of a one-node cluster create, L2 included, so the last boot can be inited as is.
	l, err := Plan("bench", 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := VMSpec{Node: l.Nodes[0], Group: l.Group, Dir: dir, Mode: qemu.ModeVmlinux, Image: img, Memory: 2048, CPUs: 2, Token: RandomToken(),
		Disks: []qemu.Disk{{Serial: SerialState, Size: 1 << 30}, {Serial: SerialEphemeral, Size: 8 << 30}, {Serial: SerialEtcd, Size: 2 << 30}}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	vm, ns, err := StartVM(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vm.Stop() })
	b, err := WaitMaintenance(ctx, vm, ns.APIEndpoint(), ns.Token)
	if err != nil {
		t.Fatal(err)
	}
	return vm, ns, b
}

// apiLatency times Status calls on one open connection: the API's own cost under emulation.
func apiLatency(t *testing.T, n NodeState, fp string) {
	mc, conn, err := client.Connect(client.Options{Endpoint: n.APIEndpoint(), Token: n.Token, Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var ds []time.Duration
	for i := 0; i < 51; i++ {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := mc.Status(ctx, &machine.StatusRequest{})
		cancel()
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if i > 0 { // the first call pays for the TLS handshake
			ds = append(ds, time.Since(start))
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	fmt.Printf("Status latency over one connection (50 calls): median %.1fms, p90 %.1fms, max %.1fms\n",
		ms(ds[len(ds)/2]), ms(ds[len(ds)*9/10]), ms(ds[len(ds)-1]))
	if s, err := mc.Status(context.Background(), &machine.StatusRequest{}); err == nil {
		fmt.Printf("machined RSS at idle in Boot: %.1f MiB\n", float64(s.MachinedRssBytes)/(1<<20))
	}
}

// printMemory prints the resident memory of machined and of each supervised service, as the node
// reports it.
func printMemory(ctx context.Context, o client.Options, when string) {
	mc, conn, err := client.Connect(o)
	if err != nil {
		fmt.Printf("memory %s: %v\n", when, err)
		return
	}
	defer conn.Close()
	s, err := mc.Status(ctx, &machine.StatusRequest{})
	if err != nil {
		fmt.Printf("memory %s: %v\n", when, err)
		return
	}
	parts := []string{fmt.Sprintf("machined %.1f MiB", float64(s.MachinedRssBytes)/(1<<20))}
	if r, err := mc.Services(ctx, &machine.ServicesRequest{}); err == nil {
		for _, svc := range r.Services {
			// machined is above; services without a process of their own (apid runs in machined) have none.
			if svc.Name != "machined" && svc.RssBytes > 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f MiB", svc.Name, float64(svc.RssBytes)/(1<<20)))
			}
		}
	}
	fmt.Printf("RSS %s: %s\n", when, strings.Join(parts, ", "))
}

// initToRunning inits the node and times the Init call to the node reporting Running (now: Kubernetes
// Ready, once Init brings it up).
func initToRunning(t *testing.T, n NodeState, fp string) {
	l, err := Plan("bench", 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := GenerateConfigs("bench", l, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data, err := config.Marshal(cfgs.Nodes["bench-cp1"])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	var tasks []string
	err = initNode(ctx, client.Options{Endpoint: n.APIEndpoint(), Token: n.Token, Fingerprint: fp}, data, func(e *machine.Event) {
		if e.Kind == "task" && e.Outcome == "done" && e.Started != nil {
			tasks = append(tasks, fmt.Sprintf("%s %.1fs", e.Task, e.Time.AsTime().Sub(e.Started.AsTime()).Seconds()))
		}
	})
	if err != nil {
		fmt.Printf("init to Running: Init failed after %.1fs: %v\n", time.Since(start).Seconds(), err)
		return
	}
	cctx, err := ClientContext(cfgs.Secrets, []string{n.APIEndpoint()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := waitRunning(ctx, n, cctx, 30*time.Minute, nil); err != nil {
		fmt.Printf("init to Running: %v\n", err)
		return
	}
	fmt.Printf("init to Running, node Ready (QEMU, 2 vCPU, 2 GiB): %.1fs\n  tasks: %s\n", time.Since(start).Seconds(), strings.Join(tasks, ", "))
	o := client.Options{Endpoint: n.APIEndpoint(), Context: cctx}
	if err := waitCheck(ctx, o, "coredns"); err != nil {
		fmt.Printf("init to CoreDNS ready: %v\n", err)
	} else {
		fmt.Printf("init to CoreDNS ready: %.1fs\n", time.Since(start).Seconds())
	}
	printMemory(ctx, o, "in Running")
}

// waitCheck polls the node's Health until the named check passes, and returns its last message if
// ctx ends first.
func waitCheck(ctx context.Context, o client.Options, name string) error {
	mc, conn, err := client.Connect(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	last := "no answer"
	for {
		if r, err := mc.Health(ctx, &machine.HealthRequest{}); err != nil {
			last = err.Error()
		} else {
			for _, c := range r.Checks {
				if c.Name == name {
					if c.Ok {
						return nil
					}
					last = c.Message
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("check %s did not pass: %s", name, last)
		case <-time.After(time.Second):
		}
	}
}

// buildFakeImage builds the image with image/internal/fakemachined, a trivial init that brings up the
// network as machined does and answers one line on port 50000.
func buildFakeImage(t *testing.T, repo string) string {
	t.Helper()
	dir := t.TempDir()
	start := time.Now()
	fmt.Println("building the image with the trivial init (fakemachined)...")
	fake := filepath.Join(dir, "fakemachined")
	for _, c := range [][]string{
		{"go", "build", "-trimpath", "-o", fake, "./image/internal/fakemachined"},
		{"go", "run", "./image/cmd/mkimage", "-out", dir, "-machined", fake, "-bundle", filepath.Join(dir, "no-bundle"), "-no-iso", "-no-raw"},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir, cmd.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	fmt.Printf("  built in %.1fs\n", time.Since(start).Seconds())
	return dir
}

// bootFake boots the trivial image and times QEMU's start to its first answer on the API port, found
// the same way as Cairn's: the network probe, then one connection at a time.
func bootFake(t *testing.T, img string, i int) time.Duration {
	t.Helper()
	vm, err := qemu.New(qemu.Config{Name: fmt.Sprintf("bare%d", i), Dir: t.TempDir(), Memory: 2048, CPUs: 2,
		Kernel: filepath.Join(img, "vmlinux"), Initramfs: filepath.Join(img, "initramfs.cpio.zst")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := vm.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer vm.Stop()
	if err := vm.WaitNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", vm.APIHostPort())
	for ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.TrimSpace(line) != "" {
				return time.Since(vm.Started())
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the trivial init never answered:\n%s", ConsoleTail(vm.ConsolePath(), 2000))
	return 0
}

func printMachine() {
	model := "unknown"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var si syscall.Sysinfo_t
	_ = syscall.Sysinfo(&si)
	qv, _ := exec.Command("qemu-system-x86_64", "--version").Output()
	first, _, _ := strings.Cut(string(qv), "\n")
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("machine: %s, %d cores, %.1f GiB RAM, %s, load %s\n", model, runtime.NumCPU(),
		float64(si.Totalram)*float64(si.Unit)/(1<<30), first, strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Println("QEMU runs with -accel tcg (emulation): KVM hangs on this machine class")
}

// printSizes lists each artifact's size; for sparse files also the blocks they really take.
func printSizes(dir string) {
	fmt.Printf("image artifacts in %s:\n", dir)
	for _, f := range []string{"vmlinuz", "vmlinux", "initramfs.cpio.zst", "rootfs.squashfs", "cairn.iso", "cairn.raw", "init", "machined", "cairnctl"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			fmt.Printf("  %-20s missing\n", f)
			continue
		}
		used := ""
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 < fi.Size()*9/10 {
			used = fmt.Sprintf(" (%.1f MiB allocated: sparse)", float64(st.Blocks*512)/(1<<20))
		}
		fmt.Printf("  %-20s %8.1f MiB%s\n", f, float64(fi.Size())/(1<<20), used)
	}
	var bundle int64
	_ = filepath.Walk(filepath.Join(dir, "bundle"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			bundle += fi.Size()
		}
		return nil
	})
	fmt.Printf("  %-20s %8.1f MiB (Kubernetes images, containerd, runc, CNI plugins)\n", "bundle/", float64(bundle)/(1<<20))
}

func printFigure(what string, ds []time.Duration) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	fmt.Printf("%s: median %.2fs, range %.2f-%.2fs over %d boots\n", what, median(s).Seconds(), s[0].Seconds(), s[len(s)-1].Seconds(), len(s))
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sizeMiB(p string) float64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / (1 << 20)
}
