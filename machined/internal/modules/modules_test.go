package modules

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/internal/modload"
)

func TestLoadFilesToleratesMissingHardware(t *testing.T) {
	var calls []string
	l := Loader{File: func(p, params string) error {
		calls = append(calls, p)
		switch filepath.Base(p) {
		case "e1000.ko":
			return syscall.ENODEV
		case "virtio_net.ko":
			return syscall.EEXIST
		case "broken.ko":
			return errors.New("exec format error")
		}
		return nil
	}}
	n, _, err := l.LoadFiles("/m", []string{"a/virtio_pci.ko", "a/e1000.ko", "a/virtio_net.ko", "a/broken.ko"})
	if n != 1 || err == nil || !strings.Contains(err.Error(), "broken") || strings.Contains(err.Error(), "e1000") {
		t.Fatalf("LoadFiles = %d, %v; want 1 loaded and only the broken module reported", n, err)
	}
	if diff := cmp.Diff([]string{"/m/a/virtio_pci.ko", "/m/a/e1000.ko", "/m/a/virtio_net.ko", "/m/a/broken.ko"}, calls); diff != "" {
		t.Errorf("files loaded (-want +got):\n%s", diff)
	}
}

// The command line's parameters reach the modules they name, and a module that refuses its parameters
// is reported with them: they are the likely cause.
func TestLoadFilesPassesCommandLineParams(t *testing.T) {
	p := modload.ParseParams("quiet libata.force=nodbdelay nvme-core.io_timeout=x virtio_net.napi_tx=1")
	got := map[string]string{}
	l := Loader{Params: &p, File: func(file, params string) error {
		got[filepath.Base(file)] = params
		if strings.HasPrefix(params, "io_timeout=x") {
			return syscall.EINVAL
		}
		return nil
	}}
	n, _, err := l.LoadFiles("/m", []string{"kernel/drivers/ata/libata.ko", "kernel/drivers/ata/ahci.ko", "kernel/drivers/nvme/host/nvme-core.ko"})
	want := map[string]string{"libata.ko": "force=nodbdelay", "ahci.ko": "", "nvme-core.ko": "io_timeout=x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parameters given (-want +got):\n%s", diff)
	}
	if n != 2 || err == nil || !strings.Contains(err.Error(), `nvme-core.ko with the command line's parameters "io_timeout=x"`) {
		t.Errorf("LoadFiles = %d, %v; want 2 loaded and nvme-core reported with its parameters", n, err)
	}
}

// A module the command line blacklists is left out; the rest load.
func TestLoadFilesSkipsBlacklisted(t *testing.T) {
	p := modload.ParseParams("modprobe.blacklist=e1000e")
	var calls []string
	l := Loader{Params: &p, File: func(file, _ string) error {
		calls = append(calls, filepath.Base(file))
		return nil
	}}
	n, left, err := l.LoadFiles("/m", []string{"a/e1000e.ko", "a/virtio_net.ko"})
	if n != 1 || err != nil || !cmp.Equal(calls, []string{"virtio_net.ko"}) || !cmp.Equal(left, []string{"e1000e"}) {
		t.Errorf("LoadFiles = %d, %q, %v, loaded %q; want only virtio_net loaded, e1000e left out", n, left, err, calls)
	}
}

func TestPaths(t *testing.T) {
	list := []byte("kernel/fs/xfs/xfs.ko\n\n# comment\nkernel/drivers/char/hw_random/virtio-rng.ko.xz\nkernel/fs/nls/nls_iso8859-1.ko\n")
	got := Paths(list, []string{"virtio_rng", "xfs"})
	if diff := cmp.Diff([]string{"kernel/fs/nls/nls_iso8859-1.ko"}, got); diff != "" {
		t.Errorf("Paths (-want +got):\n%s", diff)
	}
}

// index is a small image: the load list in dependency order and modules.dep with whole closures.
func index() *Index {
	list := "kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio_pci.ko\n" +
		"kernel/drivers/block/virtio_blk.ko\nkernel/lib/libcrc32c.ko\nkernel/fs/xfs/xfs.ko\nkernel/drivers/watchdog/softdog.ko\n" +
		"kernel/net/bridge/bridge.ko\n"
	dep := "kernel/drivers/virtio/virtio.ko:\nkernel/drivers/virtio/virtio_ring.ko:\n" +
		"kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n" +
		"kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n" +
		"kernel/lib/libcrc32c.ko:\nkernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko\nkernel/drivers/watchdog/softdog.ko:\n" +
		"kernel/net/bridge/bridge.ko:\n"
	return &Index{Order: Paths([]byte(list), nil), Deps: ParseDeps([]byte(dep))}
}

func TestFilesInLoadOrderWithDependencies(t *testing.T) {
	x := index()
	got := x.Files([]string{"xfs", "virtio-blk", "crc32c_generic"}, []string{"virtio"})
	want := []string{"kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/block/virtio_blk.ko", "kernel/lib/libcrc32c.ko", "kernel/fs/xfs/xfs.ko"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Files (-want +got):\n%s", diff)
	}
	rest := x.Rest([]string{"virtio", "virtio_ring", "virtio_pci", "virtio_blk", "libcrc32c", "xfs"})
	// Not softdog: it is loaded only where no hardware watchdog registers.
	if diff := cmp.Diff([]string{"kernel/net/bridge/bridge.ko"}, rest); diff != "" {
		t.Errorf("Rest (-want +got):\n%s", diff)
	}
}

func TestLoaded(t *testing.T) {
	got := Loaded([]byte("virtio_net 61440 0 - Live 0x0000000000000000\nsquashfs 73728 1 - Live 0x0000000000000000\n"))
	if diff := cmp.Diff([]string{"virtio_net", "squashfs"}, got); diff != "" {
		t.Errorf("Loaded (-want +got):\n%s", diff)
	}
}

func TestPresentMatchesDevices(t *testing.T) {
	a := ParseAliases([]byte(`# comment
alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci
alias acpi*:LNRO0005:* virtio_mmio
alias virtio:d00000001v* virtio_net
alias virtio:d00000002v* virtio_blk
alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000
alias pci:v*d*sv*sd*bc01sc06i01* ahci
alias pci:v*d*sv*sd*bc01sc08i02* nvme
alias scsi:t-0x00* sd_mod
alias acpi*:QEMU0002:* qemu_fw_cfg
`))
	// q35 with a virtio NIC and disk, the ICH9 AHCI controller and fw_cfg; no SCSI disk yet.
	devices := []string{
		"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
		"pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01",
		"virtio:d00000001v00001AF4", "virtio:d00000002v00001AF4",
		"acpi:QEMU0002:", "acpi:PNP0A08:PNP0A03:",
	}
	cands := []string{"virtio_pci", "virtio_mmio", "virtio_net", "virtio-blk", "e1000", "ahci", "nvme", "sd_mod", "qemu_fw_cfg", "no_aliases"}
	want := []string{"virtio_pci", "virtio_net", "virtio-blk", "ahci", "qemu_fw_cfg", "no_aliases"}
	if diff := cmp.Diff(want, a.Present(cands, devices)); diff != "" {
		t.Errorf("Present (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"virtio_mmio", "e1000", "nvme", "sd_mod"}, a.Absent(cands, devices)); diff != "" {
		t.Errorf("Absent (-want +got):\n%s", diff)
	}
	if got := a.Present([]string{"sd_mod"}, append(devices, "scsi:t-0x00")); len(got) != 1 {
		t.Errorf("a SCSI disk must make sd_mod present, got %v", got)
	}
}

func TestDeviceAliases(t *testing.T) {
	sys := t.TempDir()
	for p, v := range map[string]string{
		"bus/pci/devices/0000:00:01.0/modalias":     "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00\n",
		"bus/virtio/devices/virtio0/modalias":       "virtio:d00000001v00001AF4\n",
		"bus/platform/devices/QEMU0002:00/modalias": "acpi:QEMU0002:\n",
		"bus/acpi/devices/QEMU0002:00/modalias":     "acpi:QEMU0002:\n",
		"bus/pci/devices/0000:00:00.0/vendor":       "0x8086\n",
		"bus/cpu/devices/cpu0/modalias":             "cpu:type:x86,ven0002fam000Fmod006B:feature:,0000\n", // not a bus the boot drivers use
	} {
		if err := os.MkdirAll(filepath.Join(sys, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, p), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		buses []string
		want  []string
	}{
		{deviceBuses, []string{"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00", "acpi:QEMU0002:", "virtio:d00000001v00001AF4"}},
		{[]string{"virtio"}, []string{"virtio:d00000001v00001AF4"}},
		{[]string{"scsi"}, nil},
		{nil, nil},
	} {
		if diff := cmp.Diff(tt.want, DeviceAliases(sys, tt.buses)); diff != "" {
			t.Errorf("DeviceAliases(%q) (-want +got):\n%s", tt.buses, diff)
		}
	}
}

// TestBuses checks which buses each of the boot's sets of drivers reads, with the aliases Debian's
// modules.alias gives them, and that a pattern with no type before its wildcard reads them all: a set
// that looked on too few buses would miss a disk controller and make a configured node look fresh.
func TestBuses(t *testing.T) {
	a := ParseAliases([]byte(`alias pci:v00001AF4d*sv*sd*bc*sc*i* virtio_pci
alias of:N*T*Cvirtio,mmioC* virtio_mmio
alias acpi*:LNRO0005:* virtio_mmio
alias virtio:d00000001v* virtio_net
alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000
alias acpi*:QEMU0002:* qemu_fw_cfg
alias of:N*T*Cqemu,fw-cfg-mmio* qemu_fw_cfg
alias virtio:d00000002v* virtio_blk
alias virtio:d00000008v* virtio_scsi
alias pci:v*d*sv*sd*bc01sc06i01* ahci
alias pci:v*d*sv*sd*bc01sc08i02* nvme
alias scsi:t-0x00* sd_mod
alias block-major-8-* sd_mod
alias scsi:t-0x05* sr_mod
alias block-major-11-* sr_mod
alias *:anything* greedy
alias fs-xfs xfs
`))
	for _, tt := range []struct {
		candidates []string
		want       []string
	}{
		{Buses, []string{"pci", "acpi", "platform"}},
		{FirmwareConfig, []string{"acpi", "platform"}},
		{Network, []string{"pci", "virtio"}},
		{Disks, []string{"pci", "virtio"}},
		{DiskTypes, []string{"scsi"}},
		{[]string{"xfs", "no_aliases"}, nil},
		{[]string{"sd_mod", "greedy"}, deviceBuses},
	} {
		if diff := cmp.Diff(tt.want, a.Buses(tt.candidates)); diff != "" {
			t.Errorf("Buses(%q) (-want +got):\n%s", tt.candidates, diff)
		}
	}
}
