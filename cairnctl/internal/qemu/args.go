package qemu

import (
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Files a VM keeps in its directory.
const (
	ConsoleLog = "console.log"
	PIDFile    = "qemu.pid"
	// swtpmSocket is the control socket of the VM's swtpm (Config.TPM).
	swtpmSocket = "swtpm.sock"
	// monitorSocket is QEMU's human monitor (monitor.go): how a hung guest's vCPUs are looked at.
	monitorSocket = "monitor.sock"
	// maxSocketPath is the longest path a Unix socket's address holds on Linux (sun_path less its NUL).
	maxSocketPath = 107
	bootDisk      = "boot.qcow2"
	varsFile      = "OVMF_VARS.fd"
)

// FwCfgCmdline is the fw_cfg file carrying the extra kernel arguments in the iso and raw modes, whose
// command line is baked into GRUB's config or the UKI. machined reads it from
// /sys/firmware/qemu_fw_cfg/by_name/opt/dev.cairn/cmdline/raw (module qemu_fw_cfg).
const FwCfgCmdline = "opt/dev.cairn/cmdline"

// diskFile is where an extra disk's sparse image lives.
func diskFile(dir, serial string) string { return filepath.Join(dir, "disk-"+serial+".raw") }

// DiskPath is the image file QEMU attaches for d: the given file, or the blank one made in dir.
func DiskPath(dir string, d Disk) string {
	if d.File != "" {
		return d.File
	}
	return diskFile(dir, d.Serial)
}

// kernelArgs are the arguments the launcher adds to the command line: the console and TCG speed-ups
// (vmlinux mode only: the other modes have their command line baked in), the static L2 address in the
// kernel's ip= syntax, then the caller's.
//
//   - tsc=reliable: the vCPUs' TSCs fail the kernel's synchronisation check under multi-threaded TCG;
//     the kernel then falls back to the jiffies clocksource, coarse and slower to boot with.
//   - tsc_early_khz= (microvm): there is no PIT or HPET to calibrate the TSC; microvm hangs at random
//     without it.
//   - mitigations=off: the CPU is emulated, speculative-execution mitigations only cost boot time.
//   - cryptomgr.notests: the crypto self-tests are the slowest initcalls under TCG (~0.7 s measured
//     with initcall_debug); they test the kernel's own implementations, not the node.
//   - quiet: every console byte is an emulated UART write; the full kernel log costs ~0.5-1 s.
//   - highres=off: timers expire on the kernel's tick (4 ms) instead of each at its own time. Every Go
//     process's scheduler polls with sleeps of 20 µs and up, and under TCG each timer interrupt and the
//     context switches behind it are expensive (TB lookups after each TLB flush). An idle one-vCPU control
//     plane took 1.03 host cores with high-resolution timers, its vCPU never idle, and 0.43 without
//     (docs/figures.md); a node on real hardware keeps them.
//   - libata.force=nodbdelay: libata waits 200 ms after it resumes a SATA link before it debounces it,
//     for PHYs that misbehave when asked at once. QEMU's AHCI has no PHY, and q35 has six ports: the wait
//     was most of its driver's load (0.7 s), which the node's look for its STATE disk waits for (q35;
//     microvm has no SATA). machined hands the parameter to libata (the kernel gives a loadable module
//     none); a real SATA link keeps the wait.
func kernelArgs(c Config, tscKHz int) []string {
	var a []string
	if c.Mode == ModeVmlinux {
		a = append(a, "console=ttyS0", "tsc=reliable", "mitigations=off", "cryptomgr.notests", "highres=off")
		if c.Machine == MachineMicrovm && tscKHz > 0 {
			a = append(a, "tsc_early_khz="+strconv.Itoa(tscKHz))
		}
		if c.Machine != MachineMicrovm { // microvm has no SATA controller
			a = append(a, "libata.force=nodbdelay")
		}
		if !c.KernelLog {
			a = append(a, "quiet")
		}
	}
	if c.L2 != nil && c.L2.Address != "" {
		ip, ipnet, _ := net.ParseCIDR(c.L2.Address)
		// ip=<client>:<server>:<gateway>:<netmask>:<hostname>:<device>:<autoconf>
		a = append(a, fmt.Sprintf("ip=%s::%s:%s:%s:%s:off", ip, c.L2.Gateway, net.IP(ipnet.Mask), c.Name, c.L2.Device))
	}
	return append(a, c.Cmdline...)
}

// CPUModel is every VM's emulated CPU (-cpu): every feature TCG has, but for the two that tell the guest's
// kernel that byte-wise string instructions are fast (ERMS, FSRM). With them the kernel clears each new
// page with REP STOSB and copies with REP MOVSB, and QEMU's TCG (7.2, Debian 12's) runs a REP instruction
// one element per pass through its translated loop: a 4 KiB page took 4096 passes. Without them the kernel
// picks its REP STOSQ/MOVSQ routines, eight bytes a pass. Measured in the boot row's VM (2026-12-06,
// docs/figures.md): a page's fault and clearing 11 → 5.7 µs, the kernel's part of the boot (it copies the
// initramfs) 0.15 s shorter, machined's start 0.2 s shorter. A guest sees a CPU without fast strings, as
// on many real ones; Go programs in it clear large blocks with their AVX2 loop instead of REP STOSQ.
const CPUModel = "max,erms=off,fsrm=off"

// args builds QEMU's command line. ports maps guest TCP ports to host ports. It only reads c, so the
// tests compare it with golden files.
func args(c Config, ports map[int]int, tscKHz int) []string {
	virtioSuffix := "pci"
	a := []string{
		"-name", c.Name,
		"-accel", "tcg", // KVM hangs on this class of machine: never use it
		"-m", strconv.Itoa(c.Memory),
		"-smp", strconv.Itoa(c.CPUs),
		"-nodefaults", "-no-user-config",
		"-display", "none",
		"-serial", "file:" + filepath.Join(c.Dir, ConsoleLog),
		"-pidfile", filepath.Join(c.Dir, PIDFile),
	}
	if sock := filepath.Join(c.Dir, monitorSocket); len(sock) <= maxSocketPath {
		// A longer path does not fit a socket address and QEMU would not start: the VM goes without.
		a = append(a, "-monitor", "unix:"+sock+",server=on,wait=off")
	}
	switch {
	case c.Mode == ModeVmlinux && c.Machine == MachineMicrovm:
		// virtio-mmio devices, announced through ACPI: Debian's virtio_mmio cannot take them from the
		// command line. The legacy PIC/PIT are not needed with tsc_early_khz and the LAPIC timer.
		virtioSuffix = "device"
		a = append(a, "-M", "microvm,acpi=on,pit=off,pic=off,isa-serial=on,rtc=on,auto-kernel-cmdline=off", "-cpu", CPUModel)
	case c.Mode == ModeVmlinux:
		// qboot instead of SeaBIOS: it only jumps to the PVH entry, about 1 s sooner.
		a = append(a, "-M", "q35,smm=off,vmport=off", "-cpu", CPUModel, "-bios", "qboot.rom")
	default:
		a = append(a, "-M", "q35,smm=off,vmport=off", "-cpu", CPUModel)
	}
	if !c.RTCBase.IsZero() {
		a = append(a, "-rtc", "base="+c.RTCBase.UTC().Format("2006-01-02T15:04:05"))
	}
	switch c.Mode {
	case ModeVmlinux:
		a = append(a, "-kernel", c.Kernel, "-initrd", c.Initramfs, "-append", strings.Join(kernelArgs(c, tscKHz), " "))
	case ModeISO, ModeISOUEFI:
		if c.UEFI {
			a = append(a, pflash(c)...)
		}
		cd := 0
		if c.Mode == ModeISOUEFI {
			cd = len(c.Disks) // the disks come first (below)
		}
		a = append(a, "-drive", "file="+c.ISO+",if=none,id=cd,media=cdrom,readonly=on,format=raw",
			"-device", "ide-cd,drive=cd,bootindex="+strconv.Itoa(cd))
	case ModeRaw:
		a = append(a, pflash(c)...)
		a = append(a, "-drive", "file="+filepath.Join(c.Dir, bootDisk)+",if=none,id=boot,format=qcow2,cache=unsafe",
			"-device", "virtio-blk-pci,drive=boot,serial=boot,bootindex=0")
	}
	if c.Mode != ModeVmlinux {
		if extra := kernelArgs(c, tscKHz); len(extra) > 0 {
			// QEMU's option syntax ends a value at a comma; a doubled comma is a literal one.
			a = append(a, "-fw_cfg", "name="+FwCfgCmdline+",string="+strings.ReplaceAll(strings.Join(extra, " "), ",", ",,"))
		}
	}
	a = append(a, "-netdev", "user,id=net0"+metadataFwd(c.Metadata)+hostfwds(ports),
		"-device", "virtio-net-"+virtioSuffix+",netdev=net0"+romOff(virtioSuffix))
	if c.L2 != nil {
		a = append(a, "-netdev", "socket,id=l2,mcast="+c.L2.Group+",localaddr=127.0.0.1",
			"-device", "virtio-net-"+virtioSuffix+",netdev=l2,mac="+c.L2.MAC+romOff(virtioSuffix))
	}
	if c.TPM {
		a = append(a, "-chardev", "socket,id=chrtpm,path="+filepath.Join(c.Dir, swtpmSocket),
			"-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0")
	}
	if virtioSuffix == "pci" {
		// The hardware watchdog machined arms and pets (microvm has no PCI bus for it): a node whose
		// state machine stops answering is reset, as a real machine's watchdog would.
		a = append(a, "-device", "i6300esb", "-action", "watchdog=reset")
	}
	if c.Mode == ModeVmlinux && c.Payload != "" {
		a = append(a, "-drive", "file="+c.Payload+",if=none,id=payload,format=raw,readonly=on",
			"-device", "virtio-blk-"+virtioSuffix+",drive=payload,serial=cairn-payload")
	}
	for i, d := range c.Disks {
		id := "disk" + strconv.Itoa(i)
		dev := "virtio-blk-" + virtioSuffix + ",drive=" + id + ",serial=" + d.Serial
		if c.Mode == ModeISOUEFI {
			dev += ",bootindex=" + strconv.Itoa(i)
		}
		a = append(a, "-drive", "file="+DiskPath(c.Dir, d)+",if=none,id="+id+",format=raw,cache=unsafe", "-device", dev)
	}
	return a
}

// pflash attaches OVMF's code read-only and the node's own copy of the variable store.
func pflash(c Config) []string {
	return []string{
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + c.OVMFCode,
		"-drive", "if=pflash,format=raw,unit=1,file=" + filepath.Join(c.Dir, varsFile),
	}
}

// romOff skips the iPXE option ROM on PCI NICs: nothing boots from the network, and SeaBIOS would
// spend time initialising it.
func romOff(suffix string) string {
	if suffix == "pci" {
		return ",romfile="
	}
	return ""
}

// metadataFwd renders the user network's options for Config.Metadata: the network that holds the
// metadata address and the per-connection command, its arguments quoted for the shell-like split QEMU
// applies to it and its commas doubled for QEMU's option syntax.
func metadataFwd(cmd []string) string {
	if len(cmd) == 0 {
		return ""
	}
	quoted := make([]string, len(cmd))
	for i, a := range cmd {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return ",net=169.254.169.0/24,guestfwd=tcp:169.254.169.254:80-cmd:" + strings.ReplaceAll(strings.Join(quoted, " "), ",", ",,")
}

// hostfwds renders user-network port forwards on 127.0.0.1 in guest-port order.
func hostfwds(ports map[int]int) string {
	guests := make([]int, 0, len(ports))
	for g := range ports {
		guests = append(guests, g)
	}
	sort.Ints(guests)
	var b strings.Builder
	for _, g := range guests {
		fmt.Fprintf(&b, ",hostfwd=tcp:127.0.0.1:%d-:%d", ports[g], g)
	}
	return b.String()
}
