package cmd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/cairn-os/cairn/api/machine"
)

func TestParseSelector(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    *machine.DiskSelector
	}{
		{in: "", want: nil},
		{in: "serial=cairn-install", want: &machine.DiskSelector{Serial: "cairn-install"}},
		{in: "path=/dev/vdb, minSize=1GiB,maxSize=2GiB", want: &machine.DiskSelector{Path: "/dev/vdb", MinSize: 1 << 30, MaxSize: 2 << 30}},
		{in: "model=QEMU,wwn=0x5000,label=old", want: &machine.DiskSelector{Model: "QEMU", Wwn: "0x5000", Label: "old"}},
		{in: "serial", err: "not KEY=VALUE"},
		{in: "serial=", err: "not KEY=VALUE"},
		{in: "size=10G", err: `unknown key "size"`},
		{in: "minSize=lots", err: "minSize"},
	} {
		got, err := parseSelector(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseSelector(%q) error = %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseSelector(%q) = %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
			t.Errorf("parseSelector(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}
