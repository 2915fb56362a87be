package modload

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseParams(t *testing.T) {
	line := `BOOT_IMAGE=/vmlinuz-6.1.0 root=/dev/vda ro quiet cairn.token=abc libata.force=nodbdelay ` +
		`nvme-core.default_ps_max_latency_us=0 libata.noacpi usbcore.quirks="0781:5580:k" ` +
		`dyndbg_mod.dyndbg="func probe +p" .x=1 y.=2 -- loop.max_loop=9`
	got := ParseParams(line)
	want := Params{
		"cairn":      {"token=abc"},
		"libata":     {"force=nodbdelay", "noacpi"},
		"nvme_core":  {"default_ps_max_latency_us=0"},
		"usbcore":    {"quirks=0781:5580:k"},
		"dyndbg_mod": {`dyndbg="func probe +p"`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseParams: -want +got\n%s", diff)
	}
}

func TestParamsFor(t *testing.T) {
	p := ParseParams("libata.force=1:noncq libata.force=nodbdelay nvme_core.io_timeout=60 virtio_net.napi_tx=1")
	for _, tc := range []struct{ file, want string }{
		{"kernel/drivers/ata/libata.ko", "force=1:noncq force=nodbdelay"},
		{"/lib/modules/6.1.0/kernel/drivers/nvme/host/nvme-core.ko.xz", "io_timeout=60"},
		{"kernel/drivers/net/virtio_net.ko.zst", "napi_tx=1"},
		{"kernel/drivers/ata/ahci.ko", ""},
	} {
		if got := p.For(tc.file); got != tc.want {
			t.Errorf("For(%q) = %q, want %q", tc.file, got, tc.want)
		}
	}
}

func TestJoin(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"", "", ""},
		{"max_loop=8", "", "max_loop=8"},
		{"", "max_part=15", "max_part=15"},
		{"max_loop=8", "max_loop=16", "max_loop=8 max_loop=16"},
	} {
		if got := Join(tc.a, tc.b); got != tc.want {
			t.Errorf("Join(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestBlacklisted(t *testing.T) {
	p := ParseParams("quiet modprobe.blacklist=nouveau,e1000e modprobe.blacklist=nvme-core module_blacklist=ahci modprobe.x=1")
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"kernel/drivers/gpu/drm/nouveau/nouveau.ko", true},
		{"kernel/drivers/net/ethernet/intel/e1000e/e1000e.ko", true},
		{"kernel/drivers/nvme/host/nvme-core.ko.xz", true},
		{"kernel/drivers/net/ethernet/intel/e1000/e1000.ko", false},
		{"kernel/drivers/ata/ahci.ko", false}, // the kernel's own list: it refuses the load itself
	} {
		if got := p.Blacklisted(tc.file); got != tc.want {
			t.Errorf("Blacklisted(%q) = %v, want %v", tc.file, got, tc.want)
		}
	}
	if ParseParams("").Blacklisted("kernel/fs/xfs/xfs.ko") {
		t.Error("Blacklisted with no command line = true")
	}
}
