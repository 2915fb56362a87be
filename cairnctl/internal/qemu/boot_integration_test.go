//go:build integration

package qemu

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBanner is what image/internal/fakemachined answers on the API port.
const fakeBanner = "cairn fake machined"

var (
	imageOnce sync.Once
	imagePath string
	imageErr  error
	imageTmp  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if imageTmp != "" {
		os.RemoveAll(imageTmp)
	}
	os.Exit(code)
}

// imageDir returns a directory with vmlinux, initramfs.cpio.zst, cairn.iso and cairn.raw whose
// /sbin/machined is the fake: $CAIRN_TEST_IMAGE if set, else built once for all tests (about 15 s).
func imageDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("CAIRN_TEST_IMAGE"); d != "" {
		return d
	}
	imageOnce.Do(func() { imagePath, imageErr = buildFakeImage(t) })
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imagePath
}

func buildFakeImage(t *testing.T) (string, error) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		return "", err
	}
	if imageTmp, err = os.MkdirTemp("", "cairn-qemu-test-"); err != nil {
		return "", err
	}
	fake := filepath.Join(imageTmp, "fakemachined")
	build := exec.Command("go", "build", "-trimpath", "-o", fake, "./image/internal/fakemachined")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build fakemachined: %v: %s", err, out)
	}
	t.Logf("building the image with the fake machined into %s", imageTmp)
	mk := exec.Command("go", "run", "./image/cmd/mkimage", "-out", imageTmp, "-machined", fake, "-bundle", filepath.Join(imageTmp, "no-bundle"))
	mk.Dir = root
	if out, err := mk.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mkimage: %v: %s", err, out)
	}
	return imageTmp, nil
}

// bootToAnswer boots one VM and returns the time from QEMU's start to the fake's banner on the
// forwarded API port. With checkTools it also waits for the fake to have run the shipped mkfs.xfs,
// which shows the tools' libraries and loader made it into the image.
func bootToAnswer(t *testing.T, c Config, checkTools bool) time.Duration {
	t.Helper()
	v, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := v.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	if err := v.WaitNetwork(ctx); err != nil {
		t.Fatalf("WaitNetwork: %v\nconsole:\n%s", err, tail(v.ConsolePath()))
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(v.APIHostPort()))
	for ctx.Err() == nil {
		if line := readLine(addr); line == fakeBanner {
			d := time.Since(v.Started())
			if checkTools && !waitConsole(v.ConsolePath(), "mkfs.xfs version", 20*time.Second) {
				t.Errorf("console never showed mkfs.xfs -V running in the guest:\n%s", tail(v.ConsolePath()))
			}
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no answer on the API port\nconsole:\n%s", tail(v.ConsolePath()))
	return 0
}

// readLine makes one connection and reads one line, or "" on any failure.
func readLine(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// waitConsole reports whether the console log shows text within d.
func waitConsole(p, text string, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}

func tail(p string) string {
	b, _ := os.ReadFile(p)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// TestBootToAPI boots each mode ($CAIRN_BOOT_MODES, default all five: vmlinux/microvm, vmlinux/q35,
// iso (SeaBIOS), iso/uefi (OVMF), raw (OVMF)) $CAIRN_BOOT_RUNS times
// (default 1) and prints the median time from QEMU start to the first answer.
func TestBootToAPI(t *testing.T) {
	img := imageDir(t)
	modes := "vmlinux/microvm,vmlinux/q35,iso,iso/uefi,raw"
	if m := os.Getenv("CAIRN_BOOT_MODES"); m != "" {
		modes = m
	}
	runs := 1
	if r, err := strconv.Atoi(os.Getenv("CAIRN_BOOT_RUNS")); err == nil && r > 0 {
		runs = r
	}
	for _, mode := range strings.Split(modes, ",") {
		t.Run(strings.ReplaceAll(mode, "/", "-"), func(t *testing.T) {
			m, machine, _ := strings.Cut(mode, "/")
			uefi := machine == "uefi"
			if uefi {
				machine = ""
			}
			var times []time.Duration
			for i := 0; i < runs; i++ {
				c := Config{
					Name: "node" + strconv.Itoa(i), Dir: t.TempDir(), Memory: 1024,
					Mode: Mode(m), Machine: Machine(machine), UEFI: uefi,
					Kernel: filepath.Join(img, "vmlinux"), Initramfs: filepath.Join(img, "initramfs.cpio.zst"),
					ISO: filepath.Join(img, "cairn.iso"), Raw: filepath.Join(img, "cairn.raw"),
					Disks: []Disk{{Serial: "data1", Size: 1 << 30}},
				}
				d := bootToAnswer(t, c, i == 0)
				t.Logf("%s run %d: QEMU start to first answer %v", mode, i+1, d.Round(time.Millisecond))
				times = append(times, d)
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			t.Logf("%s: median of %d boots: %v (min %v, max %v)", mode, runs, times[len(times)/2].Round(time.Millisecond),
				times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
		})
	}
}

// TestL2 boots two nodes on a shared multicast L2 with static ip= addresses; the second connects to
// the first's API port over it.
func TestL2(t *testing.T) {
	img := imageDir(t)
	group := "230.0.0.1:" + strconv.Itoa(20000+int(time.Now().UnixNano()%20000))
	node := func(name, addr string, extra ...string) *VM {
		v, err := New(Config{
			Name: name, Dir: t.TempDir(), Memory: 1024,
			Kernel: filepath.Join(img, "vmlinux"), Initramfs: filepath.Join(img, "initramfs.cpio.zst"),
			L2:      &L2{Group: group, MAC: "52:54:00:00:00:" + addr[len(addr)-5:len(addr)-3], Address: addr},
			Cmdline: extra,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Stop() })
		return v
	}
	node("a", "10.5.0.11/24")
	b := node("b", "10.5.0.12/24", "cairn.fake.dial=10.5.0.11:50000")
	want := "dial 10.5.0.11:50000: " + fakeBanner
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(tail(b.ConsolePath()), want) {
			t.Logf("node b reached node a over the L2 after %v", time.Since(b.Started()).Round(time.Millisecond))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("node b never printed %q\nconsole:\n%s", want, tail(b.ConsolePath()))
}

// TestKillByPIDFile stops a VM through its directory only, as `cluster destroy` does from another
// process.
func TestKillByPIDFile(t *testing.T) {
	img := imageDir(t)
	dir := t.TempDir()
	v, err := New(Config{Name: "k", Dir: dir, Memory: 512,
		Kernel: filepath.Join(img, "vmlinux"), Initramfs: filepath.Join(img, "initramfs.cpio.zst")})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer v.Stop()
	for i := 0; i < 100; i++ { // QEMU writes its pid file during start-up
		if _, err := os.Stat(filepath.Join(dir, PIDFile)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case <-v.Exited():
		t.Fatalf("QEMU exited by itself: %v", v.Wait())
	default:
	}
	if !pidFileLocked(filepath.Join(dir, PIDFile)) {
		t.Fatalf("QEMU holds no lock on %s: Kill could not tell it from a stale file", PIDFile)
	}
	if err := Kill(dir); err != nil {
		t.Fatalf("Kill(%s) = %v", dir, err)
	}
	select {
	case <-v.Exited():
	case <-time.After(15 * time.Second):
		t.Fatalf("QEMU still runs 15 s after Kill(%s)", dir)
	}
	if err := Kill(dir); err != nil {
		t.Errorf("Kill(%s) of a stopped VM = %v, want nil (stale pid file)", dir, err)
	}
}
