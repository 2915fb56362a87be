package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseModuleList(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []moduleEntry
		wantErr bool
	}{
		{"empty", "", nil, false},
		{"order kept, comments and blanks skipped",
			"# built by mkimage\nkernel/drivers/block/loop.ko\n\n  kernel/fs/squashfs/squashfs.ko  \n",
			[]moduleEntry{{"kernel/drivers/block/loop.ko", ""}, {"kernel/fs/squashfs/squashfs.ko", ""}}, false},
		{"parameters", "kernel/drivers/block/loop.ko max_loop=4 max_part=2\n",
			[]moduleEntry{{"kernel/drivers/block/loop.ko", "max_loop=4 max_part=2"}}, false},
		{"compressed module", "kernel/fs/xfs/xfs.ko.xz\n", []moduleEntry{{"kernel/fs/xfs/xfs.ko.xz", ""}}, false},
		{"absolute path", "/lib/modules/x/loop.ko\n", nil, true},
		{"escapes the directory", "../../etc/passwd.ko\n", nil, true},
		{"not a module", "kernel/fs/squashfs/README\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseModuleList(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseModuleList(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(moduleEntry{})); diff != "" {
				t.Errorf("parseModuleList(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}
