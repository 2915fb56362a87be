// Command fakemachined stands in for machined while testing the image and the QEMU launcher: it runs
// as PID 1 on the root image, loads the NIC modules in the order of the image's modules.dep with
// finit_module (as machined does), configures the user-network address, and answers TCP on :50000 with
// one line. It also runs the shipped disk tools once to show that their libraries were copied. Never
// shipped.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/u-root/u-root/pkg/kmodule"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/cairn-os/cairn/internal/modload"
)

// Banner is what the fake answers on :50000; tests look for it.
const Banner = "cairn fake machined"

func main() {
	start := time.Now()
	console, err := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if err != nil {
		console = os.Stdout
	}
	logf := func(format string, a ...any) {
		fmt.Fprintf(console, "fakemachined: "+format+"\n", a...)
	}
	logf("started as PID %d, args %q", os.Getpid(), os.Args[1:])
	for _, m := range []string{"virtio_pci", "virtio_mmio", "virtio_net"} {
		if err := load(m); err != nil {
			logf("load %s: %v", m, err)
		}
	}
	logf("modules loaded in %v", time.Since(start).Round(time.Millisecond))
	if err := network(); err != nil {
		logf("network: %v", err)
	}
	ln, err := net.Listen("tcp", ":50000")
	if err != nil {
		logf("listen: %v", err)
	} else {
		logf("listening on :50000 after %v", time.Since(start).Round(time.Millisecond))
		go serve(ln)
	}
	// cairn.fake.dial=ADDR:PORT makes this node connect to another one over the cluster L2 and print
	// its banner, which shows the second NIC and the static ip= address work.
	cmdline, _ := os.ReadFile("/proc/cmdline")
	for _, w := range strings.Fields(string(cmdline)) {
		if addr, ok := strings.CutPrefix(w, "cairn.fake.dial="); ok {
			go dial(addr, logf)
		}
	}
	for _, tool := range []string{"/usr/sbin/mkfs.xfs -V", "/usr/sbin/mkfs.ext4 -V"} {
		f := strings.Fields(tool)
		out, err := exec.Command(f[0], f[1:]...).CombinedOutput()
		logf("%s: %q err=%v", tool, strings.TrimSpace(string(out)), err)
	}
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); err != nil {
			time.Sleep(time.Second)
		}
	}
}

func dial(addr string, logf func(string, ...any)) {
	for i := 0; i < 120; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			buf := make([]byte, 64)
			n, _ := c.Read(buf)
			c.Close()
			logf("dial %s: %s", addr, strings.TrimSpace(string(buf[:n])))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	logf("dial %s: gave up", addr)
}

func serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintln(c, Banner)
		c.Close()
	}
}

// network brings up lo, gives the first NIC QEMU's user-network address, and applies any ip= words
// (ip=ADDR::GW:MASK::DEV:off) to their devices.
func network() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return err
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	static := map[string]string{}
	for _, w := range strings.Fields(string(cmdline)) {
		if v, ok := strings.CutPrefix(w, "ip="); ok {
			f := strings.Split(v, ":")
			if len(f) >= 6 {
				ones, _ := net.IPMask(net.ParseIP(f[3]).To4()).Size()
				static[f[5]] = fmt.Sprintf("%s/%d", f[0], ones)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		var nics []netlink.Link
		for _, l := range links {
			if l.Type() == "device" && l.Attrs().Name != "lo" {
				nics = append(nics, l)
			}
		}
		if len(nics) > 0 {
			for i, l := range nics {
				cidr, ok := static[l.Attrs().Name]
				if !ok && i == 0 {
					cidr = "10.0.2.15/24"
				}
				if cidr == "" {
					continue
				}
				addr, err := netlink.ParseAddr(cidr)
				if err != nil {
					return err
				}
				if err := netlink.AddrAdd(l, addr); err != nil {
					return fmt.Errorf("%s: %w", l.Attrs().Name, err)
				}
				if err := netlink.LinkSetUp(l); err != nil {
					return fmt.Errorf("%s: %w", l.Attrs().Name, err)
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no network interface after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// load loads a module and what it depends on, in the order modules.dep gives, each as machined does
// (modload.Load: kmodule's own loading of a .ko reads it whole into memory first, in u-root v0.16.0).
func load(name string) error {
	paths, err := loadOrder(name, kmodule.ProbeOpts{})
	if err != nil {
		return err
	}
	for _, p := range paths {
		if err := modload.Load(p, ""); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// loadOrder is the module's path and its dependencies', each after what it needs. kmodule walks the
// dependencies in goroutines of its own and calls DryRunCB from them: the lock keeps every path (an
// unguarded append lost some, and a module was then loaded before what it needs).
func loadOrder(name string, opts kmodule.ProbeOpts) ([]string, error) {
	var (
		mu    sync.Mutex
		paths []string
	)
	opts.DryRunCB = func(p string) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, p)
	}
	if err := kmodule.ProbeOptions(name, "", opts); err != nil {
		return nil, err
	}
	return paths, nil
}
