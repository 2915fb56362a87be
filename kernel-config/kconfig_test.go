package kconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheck(t *testing.T) {
	required := map[string]string{"CONFIG_PVH": "y", "CONFIG_XFS_FS": "m", "CONFIG_VIRTIO_NET": "m", "CONFIG_RD_ZSTD": "y", "CONFIG_LOOP": "m"}
	tests := []struct {
		name   string
		config string
		want   []string
	}{
		{"all satisfied, y accepted for m", "CONFIG_PVH=y\nCONFIG_XFS_FS=m\nCONFIG_VIRTIO_NET=y\nCONFIG_RD_ZSTD=y\nCONFIG_LOOP=m\n", nil},
		{"missing, not set, and module where built-in is needed",
			"# CONFIG_PVH is not set\nCONFIG_XFS_FS=m\nCONFIG_VIRTIO_NET=m\nCONFIG_RD_ZSTD=m\n",
			[]string{
				"missing  CONFIG_LOOP (want =y or =m)",
				"missing  CONFIG_PVH (want =y)",
				"wrong    CONFIG_RD_ZSTD=m (want =y)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range Check(required, cfg) {
				got = append(got, p.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Check() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParse(t *testing.T) {
	got, err := Parse(strings.NewReader("#\n# Automatically generated\nCONFIG_LOCALVERSION=\"-amd64\"\n# CONFIG_X is not set\nCONFIG_HZ=250\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"CONFIG_LOCALVERSION": "-amd64", "CONFIG_X": "n", "CONFIG_HZ": "250"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse() (-want +got):\n%s", diff)
	}
	if _, err := Parse(strings.NewReader("PVH=y\n")); err == nil {
		t.Errorf("Parse(PVH=y) = nil error, want an error for a line without CONFIG_")
	}
}

// The fragment must parse and ask only for y or m.
func TestFragment(t *testing.T) {
	req, err := Parse(strings.NewReader(Fragment))
	if err != nil {
		t.Fatalf("cairn.config: %v", err)
	}
	if len(req) < 50 {
		t.Errorf("cairn.config has %d options, want the full list", len(req))
	}
	for k, v := range req {
		if v != "y" && v != "m" {
			t.Errorf("cairn.config: %s=%s, want y or m", k, v)
		}
	}
	for _, k := range []string{"CONFIG_PVH", "CONFIG_RD_ZSTD", "CONFIG_DEVTMPFS", "CONFIG_SQUASHFS", "CONFIG_SQUASHFS_ZSTD", "CONFIG_SQUASHFS_LZ4", "CONFIG_OVERLAY_FS", "CONFIG_BRIDGE_NETFILTER", "CONFIG_TCG_CRB", "CONFIG_EFI_STUB", "CONFIG_CGROUPS", "CONFIG_MEMCG"} {
		if req[k] == "" {
			t.Errorf("cairn.config lacks %s", k)
		}
	}
}
