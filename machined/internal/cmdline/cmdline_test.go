package cmdline

import (
	"net/netip"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/internal/kcmdline"
)

func TestParse(t *testing.T) {
	p, err := Parse(`console=ttyS0 quiet cairn.token=t0k cairn.join=10.5.0.2:50001 cairn.jointoken=abcdef.0123456789abcdef cairn.hostname=w1 foo="a b" ip=10.5.0.3::10.5.0.1:255.255.255.0:w1:eth1:none`)
	if err != nil {
		t.Fatal(err)
	}
	if p.Token != "t0k" || p.JoinAddr != "10.5.0.2:50001" || p.JoinToken != "abcdef.0123456789abcdef" || p.Hostname != "w1" {
		t.Errorf("Parse() = %+v", p)
	}
	if p.All["foo"] != "a b" || p.All["quiet"] != "" {
		t.Errorf("All = %v, want quoted value kept whole and bare flags present", p.All)
	}
	if len(p.IP) != 1 || p.IP[0].Address != netip.MustParseAddr("10.5.0.3") || p.IP[0].Prefix != 24 || p.IP[0].Device != "eth1" {
		t.Errorf("IP = %+v", p.IP)
	}
}

func TestParseIP(t *testing.T) {
	tests := []struct {
		in   string
		want *IPConfig
		bad  bool
	}{
		{"off", nil, false},
		{"dhcp", &IPConfig{DHCP: true}, false},
		{"10.0.2.15::10.0.2.2:24::eth0:off:10.0.2.3", &IPConfig{Address: netip.MustParseAddr("10.0.2.15"), Prefix: 24,
			Gateway: netip.MustParseAddr("10.0.2.2"), Device: "eth0", DNS: []netip.Addr{netip.MustParseAddr("10.0.2.3")}}, false},
		{"10.0.2.15", &IPConfig{Address: netip.MustParseAddr("10.0.2.15"), Prefix: 32}, false},
		{":::::eth0:dhcp", &IPConfig{Device: "eth0", DHCP: true}, false},
		{"10.0.2.15:::255.0.255.0", nil, true},
		{"10.0.2.999", nil, true},
		{"10.0.2.15::::::static", nil, true},
	}
	for _, tc := range tests {
		got, err := ParseIP(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("ParseIP(%q) error = %v, want bad=%v", tc.in, err, tc.bad)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" && !tc.bad {
			t.Errorf("ParseIP(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestRead(t *testing.T) {
	files := map[string]string{Kernel: "console=ttyS0 quiet\n"}
	read := func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	if got, err := Read(read); err != nil || got != "console=ttyS0 quiet\n" {
		t.Errorf("Read without fw_cfg = %q, %v; want the kernel's line", got, err)
	}
	files[FwCfg] = "libata.force=nodbdelay cairn.hostname=n1"
	if got, err := Read(read); err != nil || !cmp.Equal(kcmdline.Words(got), []string{"console=ttyS0", "quiet", "libata.force=nodbdelay", "cairn.hostname=n1"}) {
		t.Errorf("Read with fw_cfg = %q, %v; want the kernel's line, then fw_cfg's", got, err)
	}
	delete(files, Kernel)
	if _, err := Read(read); err == nil {
		t.Error("Read without /proc/cmdline: no error")
	}
}
