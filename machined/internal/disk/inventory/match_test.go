package inventory

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/config"
)

func TestMatch(t *testing.T) {
	disks, err := testScanner(t).Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		sel     config.Selector
		want    string   // path of the disk, or "" when an error is expected
		wantErr []string // every one of these must be in the error
	}{
		{name: "by serial", sel: config.Selector{Serial: "etcd-disk"}, want: "testdata/dev/vdb"},
		{name: "by path", sel: config.Selector{Path: "testdata/dev/sda"}, want: "testdata/dev/sda"},
		{name: "by udev by-id link", sel: config.Selector{Path: "testdata/dev/disk/by-id/ata-QEMU_HARDDISK_QM00002"}, want: "testdata/dev/sdb"},
		{name: "by synthesised virtio by-id", sel: config.Selector{Path: "testdata/dev/disk/by-id/virtio-etcd-disk"}, want: "testdata/dev/vdb"},
		{name: "by wwn, any spelling", sel: config.Selector{WWN: "0x5000C5001234ABCD"}, want: "testdata/dev/sda"},
		{name: "by filesystem label", sel: config.Selector{Label: "data"}, want: "testdata/dev/sda"},
		{name: "by partition filesystem label", sel: config.Selector{Label: "CAIRN_STATE"}, want: "testdata/dev/vdc"},
		{name: "by GPT partition name", sel: config.Selector{Label: "cairn-state-c1d2"}, want: "testdata/dev/vdc"},
		{name: "model and serial", sel: config.Selector{Model: "QEMU HARDDISK", Serial: "QM00002"}, want: "testdata/dev/sdb"},
		{name: "size range", sel: config.Selector{MinSize: 500 << 30, MaxSize: 2 << 40}, want: "testdata/dev/nvme0n1"},
		{name: "model matches two", sel: config.Selector{Model: "QEMU HARDDISK"},
			wantErr: []string{`2 disks match {model: "QEMU HARDDISK"}`, "testdata/dev/sda (100GiB", "testdata/dev/sdb (100GiB", "add a serial"}},
		{name: "matches none", sel: config.Selector{Serial: "nope", MinSize: 1 << 30},
			wantErr: []string{`no disk matches {serial: "nope", minSize: 1GiB}`, "candidate disks:", `testdata/dev/vdb (20GiB, serial "etcd-disk")`}},
		{name: "every field must match", sel: config.Selector{Serial: "etcd-disk", MaxSize: 1 << 30},
			wantErr: []string{"no disk matches"}},
		{name: "boot disk never matches", sel: config.Selector{Serial: "boot0"},
			wantErr: []string{"testdata/dev/vda is the boot medium"}},
		{name: "read-only never matches", sel: config.Selector{Model: "QEMU DVD-ROM"},
			wantErr: []string{"testdata/dev/sr0 is read-only"}},
		{name: "held disk never matches", sel: config.Selector{Serial: "held"},
			wantErr: []string{"testdata/dev/vdd is in use by dm-0"}},
		{name: "boot disk is not listed as a candidate", sel: config.Selector{Serial: "zzz"},
			wantErr: []string{"candidate disks:"}},
		{name: "empty selector", sel: config.Selector{}, wantErr: []string{"empty disk selector"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Match(disks, tt.sel)
			if tt.want != "" {
				if err != nil || got.Path != tt.want {
					t.Fatalf("Match(%s) = %q, %v; want %q", DescribeSelector(tt.sel), got.Path, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Match(%s) = %q, nil; want an error", DescribeSelector(tt.sel), got.Path)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Match(%s) error = %q, want it to contain %q", DescribeSelector(tt.sel), err, w)
				}
			}
			if strings.Contains(err.Error(), "candidate disks:") && strings.Contains(err.Error(), "testdata/dev/vda ") {
				t.Errorf("Match(%s) error lists the boot disk as a candidate: %q", DescribeSelector(tt.sel), err)
			}
		})
	}
}
