//go:build bench

package cluster

// The boot row of the bench: the floor (the same kernel with a trivial init) and Cairn booted alternately
// in identical VMs, each timed from QEMU's start to its first answer, found the same way for both: the
// launcher's network probe, then one connection at a time.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
	"github.com/cairn-os/cairn/cairnctl/internal/qemu"
)

// The boot row's VM: the shape (q35 + the PVH vmlinux through qboot, 1 vCPU, TCG), with the
// devices of a cluster create node (the user NIC, the cluster L2 NIC with its ip=, three blank disks).
const (
	bootCPUs   = 1
	bootMemory = 2048
)

// bootPoll is the pause between two attempts at the first answer, for the floor and Cairn alike, and how
// long each probe of the guest's network waits (qemu.Config.ProbeRead: the floor's answer comes right
// after its network, and cluster create's 250 ms probes put up to 0.25 s of error into it). Attempts
// never overlap (each finishes or fails before the next starts), so a short pause sends no burst of SYNs
// to a guest that does not listen yet, and keeps the polling's own error under 50 ms.
const bootPoll = 50 * time.Millisecond

// bootVM is the boot row's VM config; only the kernel arguments and the initramfs differ between the
// floor and Cairn.
func bootVM(t *testing.T, name string, img Artifacts, l Layout, cmdline []string) qemu.Config {
	return qemu.Config{Name: name, Dir: t.TempDir(), Memory: bootMemory, CPUs: bootCPUs, Mode: qemu.ModeVmlinux, Machine: qemu.MachineQ35,
		Kernel: img.Kernel, Initramfs: img.Initramfs, Payload: img.Payload, Cmdline: cmdline, ProbeRead: bootPoll,
		L2:    &qemu.L2{Group: l.Group, MAC: l.Nodes[0].MAC, Address: l.Nodes[0].Prefix()},
		Disks: []qemu.Disk{{Serial: SerialState, Size: 1 << 30}, {Serial: SerialEphemeral, Size: 8 << 30}, {Serial: SerialEtcd, Size: 2 << 30}}}
}

// bootResult is one boot: when the guest's network answered the probe, when the first answer came, and
// the console stamped with the host's clock.
type bootResult struct {
	network, answer time.Duration
	console         []stamp
}

// machinedStartLine is how init's last line on the console starts, for the floor and Cairn alike: the
// root image is mounted and machined (or the floor's fakemachined) is started.
const machinedStartLine = "cairn init: root image mounted"

// afterInit is the first answer's time counted from init's line (seconds): the part of the boot after the
// kernel's, which is the same kernel for the floor and Cairn. 0 if the line was not seen.
func (r bootResult) afterInit() float64 {
	for _, l := range r.console {
		if strings.HasPrefix(l.Line, machinedStartLine) {
			return r.answer.Seconds() - l.At
		}
	}
	return 0
}

// bootFloor boots the trivial init and waits for its banner on the API port.
func bootFloor(t *testing.T, c qemu.Config) bootResult {
	t.Helper()
	vm, watch, ctx, done := startBootVM(t, c)
	defer done()
	var r bootResult
	if err := vm.WaitNetwork(ctx); err != nil {
		t.Fatalf("floor: %v\n%s", err, ConsoleTail(vm.ConsolePath(), 2000))
	}
	r.network = time.Since(vm.Started())
	addr := fmt.Sprintf("127.0.0.1:%d", vm.APIHostPort())
	for ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.TrimSpace(line) != "" {
				r.answer = time.Since(vm.Started())
				r.console = watch.stop()
				return r
			}
		}
		time.Sleep(bootPoll)
	}
	t.Fatalf("the trivial init never answered:\n%s", ConsoleTail(vm.ConsolePath(), 2000))
	return r
}

// bootCairn boots Cairn and waits for an authenticated Status, pinned to the fingerprint on its console.
// The first attempt follows the banner, which machined prints once it has read its node lock: before
// that every call is answered Unavailable, and each attempt would cost the guest's one emulated CPU a TLS
// handshake taken from the boot itself. Attempts are still repeated, one connection at a time, until one
// succeeds. after, if not nil, runs once it has, with the VM still up and the options that succeeded.
func bootCairn(t *testing.T, c qemu.Config, token string, after func(client.Options)) bootResult {
	t.Helper()
	vm, watch, ctx, done := startBootVM(t, c)
	defer done()
	var r bootResult
	if err := vm.WaitNetwork(ctx); err != nil {
		t.Fatalf("cairn: %v\n%s", err, ConsoleTail(vm.ConsolePath(), 2000))
	}
	r.network = time.Since(vm.Started())
	endpoint := fmt.Sprintf("127.0.0.1:%d", vm.APIHostPort())
	var last error
	for ctx.Err() == nil {
		if fp := bannerFingerprint(vm.ConsolePath()); fp != "" {
			o := client.Options{Endpoint: endpoint, Token: token, Fingerprint: fp}
			if last = statusOnceBench(ctx, o); last == nil {
				r.answer = time.Since(vm.Started())
				r.console = watch.stop()
				if after != nil {
					after(o)
				}
				return r
			}
		}
		time.Sleep(bootPoll)
	}
	t.Fatalf("cairn never answered Status (last error: %v):\n%s", last, ConsoleTail(vm.ConsolePath(), 3000))
	return r
}

// bannerRE finds the fingerprint in machined's banner (" fingerprint: HEX"), not in its earlier log line
// (fingerprint=HEX), which comes as soon as the API listens.
var bannerRE = regexp.MustCompile(`(?m)^ fingerprint: ([0-9a-f]{64})\b`)

func bannerFingerprint(console string) string {
	b, err := os.ReadFile(console)
	if err != nil {
		return ""
	}
	m := bannerRE.FindAllSubmatch(bytes.ReplaceAll(b, []byte("\r"), nil), -1)
	if len(m) == 0 {
		return ""
	}
	return string(m[len(m)-1][1])
}

func statusOnceBench(ctx context.Context, o client.Options) error {
	mc, conn, err := client.Connect(o)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = mc.Status(ctx, &machine.StatusRequest{})
	return err
}

// startBootVM starts a boot-row VM and a watcher stamping its console; done stops both.
func startBootVM(t *testing.T, c qemu.Config) (*qemu.VM, *consoleWatch, context.Context, func()) {
	t.Helper()
	vm, err := qemu.New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	if err := vm.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	w := watchConsole(vm.ConsolePath(), vm.Started(), vm.CPUTime)
	return vm, w, ctx, func() { w.stop(); vm.Stop(); cancel() }
}

// consoleWatch reads a console file as QEMU writes it and stamps each line with the host's time since
// QEMU started: with "quiet", the guest's own lines carry no common clock, and this one is the clock the
// boot figure is measured with. Each line also carries the CPU time QEMU had used when it was seen.
type consoleWatch struct {
	once  sync.Once
	quit  chan struct{}
	done  chan struct{}
	lines []stamp
}

func watchConsole(path string, start time.Time, cpu func() (time.Duration, error)) *consoleWatch {
	w := &consoleWatch{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var f *os.File
		var pending []byte
		buf := make([]byte, 64<<10)
		for {
			if f == nil {
				f, _ = os.Open(path)
			}
			if f != nil {
				for {
					n, err := f.Read(buf)
					pending = append(pending, buf[:n]...)
					if n == 0 || err == io.EOF || err != nil {
						break
					}
				}
				at := time.Since(start).Seconds()
				var used float64
				if d, err := cpu(); err == nil {
					used = d.Seconds()
				}
				for {
					i := bytes.IndexByte(pending, '\n')
					if i < 0 {
						break
					}
					line := strings.TrimRight(string(pending[:i]), "\r")
					pending = pending[i+1:]
					if strings.TrimSpace(line) != "" {
						w.lines = append(w.lines, stamp{At: at, CPU: used, Line: line})
					}
				}
			}
			select {
			case <-w.quit:
				if f != nil {
					f.Close()
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch and returns the lines seen so far.
func (w *consoleWatch) stop() []stamp {
	w.once.Do(func() { close(w.quit) })
	<-w.done
	return w.lines
}

// buildFloor builds the image with image/internal/fakemachined: the same kernel and initramfs layout as
// Cairn's (init, the root image, its modules and tools), with a trivial init in machined's place that
// loads the NIC modules, sets the addresses statically and answers one line on port 50000.
func buildFloor(t *testing.T, repo string) (string, time.Duration) {
	t.Helper()
	dir := t.TempDir()
	start := time.Now()
	fake := filepath.Join(dir, "fakemachined")
	mkimage := []string{"go", "run", "./image/cmd/mkimage", "-out", dir, "-machined", fake, "-bundle", "", "-no-iso", "-no-raw"}
	if kr := os.Getenv("CAIRN_KERNEL_ROOT"); kr != "" {
		// The image under test was built with make kernel's kernel: the floor boots the same one.
		mkimage = append(mkimage, "-kernel-root", kr)
	}
	for _, c := range [][]string{
		{"go", "build", "-trimpath", "-o", fake, "./image/internal/fakemachined"},
		mkimage,
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir, cmd.Env = repo, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return dir, time.Since(start)
}

// printTimeline prints a boot's console with the host's stamps: seconds from QEMU's start, and how busy
// QEMU was since the last line that has that figure (its CPU time's growth over the time between them;
// under one vCPU, what is missing to 100 % the guest spent idle, waiting). Lines closer than 50 ms to
// that one have none: the CPU time counts in hundredths.
func printTimeline(w io.Writer, title string, lines []stamp) {
	fmt.Fprintf(w, "\n%s (seconds from QEMU's start as the host saw each console line; QEMU's CPU since the last line with it):\n", title)
	var prev stamp
	for _, l := range lines {
		line := l.Line
		if len(line) > 160 {
			line = line[:160] + "…"
		}
		busy := "     "
		if dt := l.At - prev.At; dt >= 0.05 && l.CPU > 0 {
			busy = fmt.Sprintf("%4.0f%%", 100*(l.CPU-prev.CPU)/dt)
			prev = l
		}
		fmt.Fprintf(w, "  %6.2f %s  %s\n", l.At, busy, line)
	}
}

// TestBootTimeline boots Cairn once in the boot row's VM and prints its console stamped with the host's
// clock: where a boot's time goes. CAIRN_BENCH_KERNEL_LOG=1 keeps the kernel's own log (it costs about
// 0.5–1 s of console writes); CAIRN_BENCH_MICROVM=1 boots cluster create's VM (microvm, 2 vCPUs) instead
// of the boot row's; CAIRN_BENCH_CMDLINE adds kernel arguments (e.g. GODEBUG=inittrace=1, which
// the kernel hands to init's environment and init to machined's). Run it alone:
//
//	go test -tags bench -run TestBootTimeline -count=1 -v ./cairnctl/internal/cluster/
func TestBootTimeline(t *testing.T) {
	_, _, img := benchImage(t)
	l, err := Plan("bench", 1, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	token := RandomToken()
	c := bootVM(t, "cairn", img, l, append([]string{"cairn.token=" + token}, strings.Fields(os.Getenv("CAIRN_BENCH_CMDLINE"))...))
	c.KernelLog = os.Getenv("CAIRN_BENCH_KERNEL_LOG") == "1"
	if os.Getenv("CAIRN_BENCH_MICROVM") == "1" { // cluster create's VM instead of the boot row's
		c.Machine, c.CPUs = qemu.MachineMicrovm, 2
	}
	var again []time.Duration
	r := bootCairn(t, c, token, func(o client.Options) {
		// The next calls, each on a new connection: how much of the first answer was code run for the
		// first time (a TLS handshake and a gRPC call, translated on first use under emulation).
		for range 3 {
			start := time.Now()
			if err := statusOnceBench(context.Background(), o); err != nil {
				t.Errorf("Status again: %v", err)
			}
			again = append(again, time.Since(start))
		}
	})
	fmt.Printf("the next Status calls, each on a new connection: %v\n", again)
	printTimeline(os.Stdout, fmt.Sprintf("Cairn boot: network %.2fs, first Status %.2fs", r.network.Seconds(), r.answer.Seconds()), r.console)
}
