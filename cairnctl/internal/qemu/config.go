// Package qemu starts Cairn nodes as QEMU virtual machines for the e2e tests and `cairnctl cluster
// create`: it builds the command line (pure, golden-tested), prepares the node's directory (disks,
// copy-on-write boot disk, UEFI variables), starts QEMU under TCG, and tells when the guest's network
// is up without flooding QEMU's user network with connection attempts (see WaitNetwork).
package qemu

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"time"

	"github.com/cairn-os/cairn/api/config"
)

// Mode is how the node boots.
type Mode string

// Boot modes.
const (
	// ModeVmlinux boots the uncompressed PVH kernel directly: the fastest under TCG.
	ModeVmlinux Mode = "vmlinux"
	// ModeISO boots cairn.iso through SeaBIOS and GRUB, like a machine installed from a CD.
	ModeISO Mode = "iso"
	// ModeISOUEFI boots cairn.iso through OVMF (UEFI), with the extra disks before the CD in the boot
	// order, as on a machine with an empty disk: once `cairnctl install` has written a disk, it boots
	// from the disk.
	ModeISOUEFI Mode = "iso-uefi"
	// ModeRaw boots a copy-on-write overlay of cairn.raw through OVMF (UEFI) and the UKI on its ESP.
	ModeRaw Mode = "raw"
)

// Machine is QEMU's machine type for ModeVmlinux (the other modes always use q35).
type Machine string

// Machine types.
const (
	MachineMicrovm Machine = "microvm"
	MachineQ35     Machine = "q35"
)

// APIPort is machined's API port in the guest; ProbePort is a port nothing listens on, used only to
// see the guest's TCP stack answer with a reset.
const (
	APIPort   = config.MachinePort
	ProbePort = 9
)

// Disk is an extra blank disk: a sparse raw file attached as virtio-blk with the given serial, which
// is how tests and machine configs select it (never by /dev/vdX order).
type Disk struct {
	Serial string
	Size   int64 // bytes
	// File, when set, is an existing disk image (absolute path) attached instead of a new blank file in
	// Dir; Size is then ignored. Tests use it to hand a node a disk that already holds something.
	File string
}

// L2 is a second NIC on a network shared by the cluster's VMs, without root: every VM joins the same
// QEMU socket multicast group bound to the loopback interface, so frames never leave this host.
type L2 struct {
	Group string // multicast group and port, e.g. "230.0.0.1:5610"; one per cluster
	MAC   string // 52:54:00:xx:xx:xx, unique per VM
	// Address is the node's static address in CIDR form, e.g. "10.5.0.11/24", given as ip= on the
	// kernel command line; "" gives none (the node gets it from its platform's network config).
	Address string
	Gateway string // optional
	Device  string // the guest's name for the NIC; default eth1 (the user-network NIC is eth0)
}

// Config describes one node VM.
type Config struct {
	Name   string // node name; also the hostname in ip=
	Dir    string // working directory: disks, console.log, qemu.pid
	Memory int    // MiB, default 2048
	CPUs   int    // default 2
	// Nice is the niceness QEMU and all its threads (the vCPUs') run at on the host, 0-19; 0 is the
	// host's default.
	Nice int
	Mode Mode // default ModeVmlinux
	// Machine is for ModeVmlinux; default MachineMicrovm, the fastest: booted alternately 6 times
	// each here, microvm answered in 3.03 s (median) and q35 with qboot in 3.44 s. q35 gives machined
	// the same virtio-pci devices as the iso and raw modes.
	Machine Machine
	Cmdline []string // extra kernel arguments (cairn.token=..., per-node settings)
	// UEFI boots the ISO through OVMF instead of SeaBIOS (raw mode always uses OVMF).
	UEFI bool
	// KernelLog keeps the kernel's full log on the console (vmlinux mode drops "quiet").
	KernelLog bool
	Ports     []int // extra guest TCP ports to forward from free host ports (6443, 50001, ...)
	// HostPorts pins guest ports to these host ports (a restarted node keeps the ports its clients
	// know); the others get free ones.
	HostPorts map[int]int
	// RTCBase starts the guest's real-time clock at this time instead of the host's (a node rebooting
	// months later, for certificate renewal tests); zero: the host's time.
	RTCBase time.Time
	Disks   []Disk
	L2      *L2
	// TPM gives the VM a TPM 2.0 (tpm-tis) emulated by swtpm, whose state lives in Dir/tpm and survives
	// a restart, as a machine's TPM does. q35 only (microvm has no ISA bus for it).
	TPM bool
	// Metadata is a command QEMU runs for each TCP connection the guest opens to an instance metadata
	// service's address (169.254.169.254:80), with the connection as its standard input and output
	// (cairnctl's imds package serves one that way). The user network then uses 169.254.169.0/24:
	// QEMU forwards only addresses inside its own network.
	Metadata []string
	// ProbeRead is how long each of WaitNetwork's probes waits for the guest's answer, which bounds how
	// late WaitNetwork notices it (see probeRead, the default). A boot measurement wants it short.
	ProbeRead time.Duration

	// Artifacts (absolute paths): Kernel and Initramfs for ModeVmlinux, ISO or Raw for the others.
	// Payload (vmlinux mode, optional) is attached as a read-only disk: the ISO and the raw disk carry
	// the payload themselves (api/payload's Medium).
	Kernel, Initramfs, Payload, ISO, Raw string
	// BootDiskSize is the virtual size of the raw mode's copy-on-write boot disk; 0 keeps cairn.raw's.
	BootDiskSize int64

	QEMU     string // default qemu-system-x86_64
	OVMFCode string // default /usr/share/OVMF/OVMF_CODE_4M.fd
	OVMFVars string // template copied into Dir; default /usr/share/OVMF/OVMF_VARS_4M.fd
	// TSCKHz is passed as tsc_early_khz= for microvm, which has no timer to calibrate the TSC against
	// and hangs at random without it; 0 reads the host's TSC frequency (TCG runs the guest's TSC at it).
	TSCKHz int
}

var serialRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,20}$`)

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" || c.Dir == "" {
		return c, errors.New("qemu: Name and Dir are required")
	}
	if c.Memory == 0 {
		c.Memory = 2048
	}
	if c.CPUs == 0 {
		c.CPUs = 2
	}
	if c.Nice < 0 || c.Nice > 19 {
		return c, fmt.Errorf("qemu: nice %d is outside 0-19", c.Nice)
	}
	if c.Mode == "" {
		c.Mode = ModeVmlinux
	}
	if c.Machine == "" {
		c.Machine = MachineMicrovm
	}
	if c.QEMU == "" {
		c.QEMU = "qemu-system-x86_64"
	}
	if c.OVMFCode == "" {
		c.OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	}
	if c.OVMFVars == "" {
		c.OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	}
	switch c.Mode {
	case ModeVmlinux:
		if c.Kernel == "" || c.Initramfs == "" {
			return c, errors.New("qemu: vmlinux mode needs Kernel and Initramfs")
		}
		if c.Machine != MachineMicrovm && c.Machine != MachineQ35 {
			return c, fmt.Errorf("qemu: unknown machine %q (microvm or q35)", c.Machine)
		}
		if c.UEFI {
			return c, errors.New("qemu: UEFI applies to the iso and raw modes only")
		}
	case ModeISO, ModeISOUEFI:
		if c.ISO == "" {
			return c, errors.New("qemu: iso mode needs ISO")
		}
		c.Machine = MachineQ35
		c.UEFI = c.UEFI || c.Mode == ModeISOUEFI
	case ModeRaw:
		if c.Raw == "" {
			return c, errors.New("qemu: raw mode needs Raw")
		}
		c.Machine = MachineQ35
		c.UEFI = true
	default:
		return c, fmt.Errorf("qemu: unknown boot mode %q (vmlinux, iso, iso-uefi or raw)", c.Mode)
	}
	if c.TPM && c.Machine == MachineMicrovm {
		return c, errors.New("qemu: a TPM needs the q35 machine (microvm has no ISA bus for tpm-tis): use --mode iso, iso-uefi or raw")
	}
	seen := map[string]bool{"boot": true}
	for _, d := range c.Disks {
		if !serialRE.MatchString(d.Serial) || seen[d.Serial] {
			return c, fmt.Errorf("qemu: disk serial %q must be unique, 1-20 of [A-Za-z0-9_-], and not \"boot\"", d.Serial)
		}
		seen[d.Serial] = true
		if d.File != "" {
			if !filepath.IsAbs(d.File) {
				return c, fmt.Errorf("qemu: disk %s: file %q must be an absolute path", d.Serial, d.File)
			}
			continue
		}
		if d.Size <= 0 {
			return c, fmt.Errorf("qemu: disk %s: size must be positive", d.Serial)
		}
	}
	if c.L2 != nil {
		l := *c.L2
		if _, _, err := net.SplitHostPort(l.Group); err != nil {
			return c, fmt.Errorf("qemu: L2 group %q: %w", l.Group, err)
		}
		if _, err := net.ParseMAC(l.MAC); err != nil {
			return c, fmt.Errorf("qemu: L2 MAC: %w", err)
		}
		if _, _, err := net.ParseCIDR(l.Address); err != nil && l.Address != "" {
			return c, fmt.Errorf("qemu: L2 address: %w", err)
		}
		if l.Device == "" {
			l.Device = "eth1"
		}
		c.L2 = &l
	}
	return c, nil
}
