//go:build bench

package cluster

// The figures of `make bench` (hack/bench/bench.sh). They live here, not in hack/bench, because they
// boot VMs with the launcher and the boot code of cluster create, which Go's internal rule keeps inside
// cairnctl/. They print and never assert a time.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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

// benchImage finds the repository, the image directory (CAIRN_IMAGE_DIR, default _out) and its vmlinux
// boot artifacts.
func benchImage(t *testing.T) (repo, out string, img Artifacts) {
	t.Helper()
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	out = os.Getenv("CAIRN_IMAGE_DIR")
	if out == "" {
		out = filepath.Join(repo, "_out")
	}
	img, err = FindArtifacts(out, qemu.ModeVmlinux)
	if err != nil {
		t.Fatal(err)
	}
	return repo, out, img
}

func TestBench(t *testing.T) {
	repo, out, img := benchImage(t)
	f := &figures{Started: time.Now(), Commit: gitCommit(repo), Machine: hostInfo(), Kernel: kernelVersion(filepath.Join(out, "vmlinux")), Sizes: sizes(out), Timelines: map[string][]stamp{}}
	fmt.Println(f.Machine)
	fmt.Println("kernel:", f.Kernel)

	bootRow(t, f, repo, img)

	// The rest runs on one node shaped as cluster create makes it (microvm, 2 vCPUs, 2 GiB).
	vm, ns, b := bootReal(t, img)
	f.add("boot to first Status, cluster create's VM (microvm, 2 vCPU), one boot", "s", b.API.Seconds(), "", "")
	apiLatency(t, f, ns, b.Fingerprint)
	bootIdleMemory(f, vm, ns, b.Fingerprint)
	if os.Getenv("CAIRN_BENCH_INIT") != "0" {
		initToRunning(t, f, vm, ns, b.Fingerprint)
	}
	vm.Stop()

	f.print(os.Stdout)
	p, err := f.write(filepath.Join(out, "bench"))
	if err != nil {
		t.Fatalf("write the figures: %v", err)
	}
	fmt.Printf("\nfigures written to %s\n", p)
}

// bootRow boots the floor and Cairn alternately, benchRuns times each, in the same VM shape, and records
// both figures and their ratio (the target: Cairn within 1.15 times the floor). Alternating
// spreads a change in the host's load over both. $CAIRN_BENCH_COMPARE (image directories, comma-separated)
// adds other builds to each round, each with its own row: two builds compared in one run, against the
// same floor.
func bootRow(t *testing.T, f *figures, repo string, img Artifacts) {
	floorDir, took := buildFloor(t, repo)
	fmt.Printf("built the floor image (fakemachined) in %.1fs\n", took.Seconds())
	l, err := Plan("bench", 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	type build struct {
		name string
		img  Artifacts
		runs []bootResult
	}
	builds := []*build{{name: "Cairn", img: img}}
	for _, dir := range strings.Split(os.Getenv("CAIRN_BENCH_COMPARE"), ",") {
		if dir == "" {
			continue
		}
		a, err := FindArtifacts(dir, qemu.ModeVmlinux)
		if err != nil {
			t.Fatal(err)
		}
		builds = append(builds, &build{name: "Cairn " + dir, img: a})
	}
	runs := benchRuns()
	var floor []bootResult
	for i := 0; i < runs; i++ {
		fc := bootVM(t, fmt.Sprintf("floor%d", i), Artifacts{Kernel: filepath.Join(floorDir, "vmlinux"), Initramfs: filepath.Join(floorDir, "initramfs.cpio.zst")}, l, nil)
		r := bootFloor(t, fc)
		floor = append(floor, r)
		fmt.Printf("  boot %d/%d floor: network %.2fs, first answer %.2fs (%.2fs after init's line)\n", i+1, runs, r.network.Seconds(), r.answer.Seconds(), r.afterInit())
		for _, b := range builds {
			token := RandomToken()
			cc := bootVM(t, fmt.Sprintf("cairn%d", i), b.img, l, []string{"cairn.token=" + token})
			r = bootCairn(t, cc, token, nil)
			b.runs = append(b.runs, r)
			fmt.Printf("  boot %d/%d %s: network %.2fs, first Status %.2fs (%.2fs after init's line)\n", i+1, runs, b.name, r.network.Seconds(), r.answer.Seconds(), r.afterInit())
		}
	}
	shape := fmt.Sprintf("q35 + PVH vmlinux, %d vCPU, %d MiB, TCG", bootCPUs, bootMemory)
	fm := f.series("boot to first answer, floor (same kernel, trivial init)", "s", answers(floor), "",
		fmt.Sprintf("%s; initramfs %.1f MiB", shape, sizeMiB(filepath.Join(floorDir, "initramfs.cpio.zst"))))
	f.series("boot to guest network up, floor", "s", networks(floor), "", "the launcher's probe: the guest resets a connection to port 9")
	f.series("init's line to first answer, floor", "s", afterInits(floor), "", afterInitNote)
	f.Timelines["floor"] = medianBoot(floor).console
	printTimeline(os.Stdout, "median floor boot", f.Timelines["floor"])
	for _, b := range builds {
		cm := f.series("boot to first authenticated Status, "+b.name, "s", answers(b.runs), fmt.Sprintf("≤ %.2f s (1.15 × floor)", 1.15*fm),
			fmt.Sprintf("%s; initramfs %.1f MiB", shape, sizeMiB(b.img.Initramfs)))
		f.series("boot to guest network up, "+b.name, "s", networks(b.runs), "", "")
		f.series("init's line to first Status, "+b.name, "s", afterInits(b.runs), "", "")
		if fm > 0 {
			f.add(b.name+" / floor (medians)", "x", cm/fm, "≤ 1.15", "")
		}
		f.Timelines[b.name] = medianBoot(b.runs).console
		printTimeline(os.Stdout, "median boot, "+b.name, f.Timelines[b.name])
	}
}

func answers(rs []bootResult) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.answer.Seconds())
	}
	return out
}

// afterInitNote says what the rows of afterInits leave out.
const afterInitNote = "from init's line on the console (the root image mounted, machined started): without the kernel's part, which moves with the host by tenths of a second"

func afterInits(rs []bootResult) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.afterInit())
	}
	return out
}

func networks(rs []bootResult) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.network.Seconds())
	}
	return out
}

// medianBoot is the boot whose answer time is the median (the lower middle one for an even count).
func medianBoot(rs []bootResult) bootResult {
	s := append([]bootResult(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].answer < s[j].answer })
	return s[(len(s)-1)/2]
}

// bootReal boots the real image as cluster create does (its VM, disks and L2) and waits for its
// maintenance API, so it can be inited as is.
func bootReal(t *testing.T, img Artifacts) (*qemu.VM, NodeState, *Boot) {
	t.Helper()
	dir := t.TempDir()
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
func apiLatency(t *testing.T, f *figures, n NodeState, fp string) {
	mc, conn, err := client.Connect(client.Options{Endpoint: n.APIEndpoint(), Token: n.Token, Fingerprint: fp})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var ds []float64
	for i := 0; i < 51; i++ {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := mc.Status(ctx, &machine.StatusRequest{})
		cancel()
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if i > 0 { // the first call pays for the TLS handshake
			ds = append(ds, ms(time.Since(start)))
		}
	}
	f.series("Status latency over one connection", "ms", ds, "", "")
}

// bootReleased is machined's log line once it has given back what the boot sequence used (10 s after
// the sequence): the boot's figure of idle memory is read after it, like the one after Init.
const bootReleased = `msg="released start-up memory" sequence=boot`

// bootIdleMemory records machined's memory in Boot once the boot's start-up memory is given back.
func bootIdleMemory(f *figures, vm *qemu.VM, n NodeState, fp string) {
	const what = "machined RSS at idle in Boot"
	deadline := time.Now().Add(time.Minute)
	for {
		b, _ := os.ReadFile(vm.ConsolePath())
		if bytes.Contains(b, []byte(bootReleased)) {
			break
		}
		if time.Now().After(deadline) {
			f.add(what, "MiB", 0, "", "machined never logged that it released the boot's memory")
			return
		}
		time.Sleep(time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	recordMemory(ctx, f, client.Options{Endpoint: n.APIEndpoint(), Token: n.Token, Fingerprint: fp}, "at idle in Boot", "")
}

// recordMemory records the resident memory of machined and of each supervised service, as the node
// reports it.
// target is the issue's, on the row it applies to.
func recordMemory(ctx context.Context, f *figures, o client.Options, when, target string) {
	mc, conn, err := client.Connect(o)
	if err != nil {
		f.add("memory "+when, "MiB", 0, "", err.Error())
		return
	}
	defer conn.Close()
	s, err := mc.Status(ctx, &machine.StatusRequest{})
	if err != nil {
		f.add("memory "+when, "MiB", 0, "", err.Error())
		return
	}
	// Anonymous memory is the Go heap, stacks and runtime; file-backed is machined's binary as far as it
	// is paged in: they shrink by different means.
	f.add("machined RSS "+when, "MiB", float64(s.MachinedRssBytes)/(1<<20), target,
		fmt.Sprintf("anonymous %.1f MiB, file-backed %.1f MiB", float64(s.MachinedRssAnonBytes)/(1<<20), float64(s.MachinedRssFileBytes)/(1<<20)))
	if r, err := mc.Services(ctx, &machine.ServicesRequest{}); err == nil {
		for _, svc := range r.Services {
			// machined is above; services without a process of their own (apid runs in machined) have none.
			if svc.Name != "machined" && svc.RssBytes > 0 {
				f.add(svc.Name+" RSS "+when, "MiB", float64(svc.RssBytes)/(1<<20), "", "")
			}
		}
	}
}

// initToRunning inits the node and times the Init call to the node reporting Running (Kubernetes
// Ready) and to CoreDNS ready, with the host CPU the VM used on the way (vmCPU).
func initToRunning(t *testing.T, f *figures, vm *qemu.VM, n NodeState, fp string) {
	l, err := Plan("bench", 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgs, err := GenerateConfigs("bench", l, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	data, err := config.Marshal(cfgs.Nodes["bench-cp1"])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const what = "init to Running, node Ready (microvm, 2 vCPU, 2 GiB)"
	fmt.Println("  init: sent; Running and CoreDNS take minutes under emulation")
	start := time.Now()
	cpu := newVMCPU(vm)
	var tasks []string
	err = initNode(ctx, client.Options{Endpoint: n.APIEndpoint(), Token: n.Token, Fingerprint: fp}, data, "", func(e *machine.Event) {
		if e.Kind == "task" && e.Outcome == "done" && e.Started != nil {
			tasks = append(tasks, fmt.Sprintf("%s %.1fs", e.Task, e.Time.AsTime().Sub(e.Started.AsTime()).Seconds()))
			cpu.phase(e.Task, 2*time.Second)
		}
	})
	if err != nil {
		f.add(what, "s", 0, "≤ 120 s", fmt.Sprintf("Init failed after %.1fs: %v", time.Since(start).Seconds(), err))
		return
	}
	cctx, err := ClientContext(cfgs.Secrets, []string{n.APIEndpoint()}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := waitRunning(ctx, n, cctx, 30*time.Minute, nil); err != nil {
		f.add(what, "s", 0, "≤ 120 s", err.Error())
		return
	}
	f.add(what, "s", time.Since(start).Seconds(), "≤ 120 s", "tasks: "+strings.Join(tasks, ", "))
	fmt.Printf("  init: node Ready after %.1fs\n", time.Since(start).Seconds())
	cpu.phase("Running", 2*time.Second)
	o := client.Options{Endpoint: n.APIEndpoint(), Context: cctx}
	if err := waitCheck(ctx, o, "coredns"); err != nil {
		f.add("init to CoreDNS ready", "s", 0, "≤ 150 s", err.Error())
	} else {
		f.add("init to CoreDNS ready", "s", time.Since(start).Seconds(), "≤ 150 s", "")
		fmt.Printf("  init: CoreDNS ready after %.1fs\n", time.Since(start).Seconds())
		cpu.phase("CoreDNS ready", 0)
	}
	cpu.record(f, "host cores the VM kept busy, Init to CoreDNS ready")
	recordMemory(ctx, f, o, "in Running", "")
	// The figure is machined's memory once the node has run a while: what start-up and Init
	// touched is given back 10 s after the sequence, and what the steady work (health checks, the
	// kubelet's and etcd's probes, log polling, the CSR approver) touches comes back meanwhile.
	if settle := benchSettle(); settle > 0 {
		at := start.Add(settle)
		if time.Until(at) > 0 {
			fmt.Printf("  memory: read again at %s, %s after Init (CAIRN_BENCH_SETTLE)\n", at.Format("15:04:05"), settle)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(at)):
			recordMemory(ctx, f, o, fmt.Sprintf("%s after Init", settle), "≤ 20 MB after 10 min")
		}
	}
}

// benchSettle is how long after Init the bench measures memory again: CAIRN_BENCH_SETTLE (a Go
// duration, 0 to skip), 10 minutes by default.
func benchSettle() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("CAIRN_BENCH_SETTLE")); err == nil {
		return d
	}
	return 10 * time.Minute
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
