package kmod

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const fakeDep = `kernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko
kernel/lib/libcrc32c.ko:
kernel/crypto/crc32c_generic.ko:
kernel/arch/x86/crypto/crc32c-intel.ko:
kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko
kernel/lib/crc16.ko:
kernel/fs/mbcache.ko:
kernel/fs/jbd2/jbd2.ko:
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/net/netfilter/xt_LOG.ko:
kernel/net/netfilter/nf_log_syslog.ko:
kernel/net/a.ko: kernel/net/b.ko
kernel/net/b.ko: kernel/net/a.ko
kernel/net/broken.ko: kernel/net/nowhere.ko
`

const fakeSoftdep = `# comment
softdep ext4 pre: crypto-crc32c
softdep jbd2 pre: crypto-crc32c
softdep xt_LOG pre: nf_log_syslog post: not_a_module
`

func fakeIndex(t *testing.T) *Index {
	t.Helper()
	ix, err := Parse(strings.NewReader(fakeDep), strings.NewReader(fakeSoftdep))
	if err != nil {
		t.Fatal(err)
	}
	ix.Aliases["crypto-crc32c"] = []string{"crc32c_intel", "crc32c_generic", "crc32c_builtin_only"}
	ix.Builtin["tpm_tis"] = true
	return ix
}

func TestClosure(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{"no dependencies", []string{"xfs"}, []string{"kernel/lib/libcrc32c.ko", "kernel/fs/xfs/xfs.ko"}, ""},
		{"deps in modprobe order, shared deps once",
			[]string{"virtio_net"},
			[]string{"kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/virtio/virtio.ko", "kernel/net/core/failover.ko",
				"kernel/drivers/net/net_failover.ko", "kernel/drivers/net/virtio_net.ko"}, ""},
		{"softdep alias resolved to every provider, sorted, before the module",
			[]string{"ext4"},
			[]string{"kernel/crypto/crc32c_generic.ko", "kernel/arch/x86/crypto/crc32c-intel.ko",
				"kernel/fs/jbd2/jbd2.ko", "kernel/fs/mbcache.ko", "kernel/lib/crc16.ko", "kernel/fs/ext4/ext4.ko"}, ""},
		{"pre softdep by name; unknown post softdep ignored",
			[]string{"xt_LOG"}, []string{"kernel/net/netfilter/nf_log_syslog.ko", "kernel/net/netfilter/xt_LOG.ko"}, ""},
		{"dashes and underscores are the same name", []string{"crc32c_intel"}, []string{"kernel/arch/x86/crypto/crc32c-intel.ko"}, ""},
		{"built-in skipped", []string{"tpm_tis", "xfs"}, []string{"kernel/lib/libcrc32c.ko", "kernel/fs/xfs/xfs.ko"}, ""},
		{"unknown module", []string{"nosuch"}, nil, "module nosuch: not in modules.dep nor built in"},
		{"cycle", []string{"a"}, nil, "module dependency cycle: a -> b -> kernel/net/a.ko"},
		{"dependency missing from modules.dep", []string{"broken"}, nil, "module kernel/net/broken.ko needs kernel/net/nowhere.ko, which modules.dep does not list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fakeIndex(t).Closure(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Closure(%v) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Closure(%v) = %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Closure(%v) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestDepFileShipsOnlyTheSubset(t *testing.T) {
	ix := fakeIndex(t)
	mods, err := ix.Closure([]string{"xfs", "virtio_net"})
	if err != nil {
		t.Fatal(err)
	}
	got := string(ix.DepFile(mods))
	want := `kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/fs/xfs/xfs.ko: kernel/lib/libcrc32c.ko
kernel/lib/libcrc32c.ko:
kernel/net/core/failover.ko:
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DepFile() (-want +got):\n%s", diff)
	}
}

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/arch/x86/crypto/crc32c-intel.ko": "crc32c_intel",
		"kernel/fs/xfs/xfs.ko.xz":                "xfs",
		"nf_conntrack":                           "nf_conntrack",
		"br-netfilter":                           "br_netfilter",
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("kernel/fs/xfs/xfs.ko\n"), nil); err == nil {
		t.Errorf("Parse(line without colon) = nil error, want an error")
	}
}

func TestFilterAliases(t *testing.T) {
	in := `# Aliases extracted from modules themselves.
alias virtio:d00000001v* virtio_net
alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000
alias fs-xfs xfs
alias crypto-crc32c crc32c_intel
`
	got, err := FilterAliases(strings.NewReader(in), []string{"kernel/drivers/net/virtio_net.ko", "kernel/fs/xfs/xfs.ko", "kernel/arch/x86/crypto/crc32c-intel.ko"})
	if err != nil {
		t.Fatal(err)
	}
	want := "alias virtio:d00000001v* virtio_net\nalias fs-xfs xfs\nalias crypto-crc32c crc32c_intel\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("FilterAliases() (-want +got):\n%s", diff)
	}
}
