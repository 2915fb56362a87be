package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlanMount(t *testing.T) {
	const bindRemount = syscall.MS_REMOUNT | syscall.MS_BIND
	tests := []struct {
		name string
		args []string
		want []call
	}{
		{"kubelet tmpfs volume", []string{"-t", "tmpfs", "-o", "size=100m,mode=0755", "tmpfs", "/var/lib/kubelet/pods/x/volumes/secret"},
			[]call{{"tmpfs", "/var/lib/kubelet/pods/x/volumes/secret", "tmpfs", 0, "size=100m,mode=0755"}}},
		{"kubelet bind", []string{"-o", "bind", "/src", "/dst"},
			[]call{{"/src", "/dst", "", syscall.MS_BIND, ""}}},
		{"bind read-only needs a remount", []string{"-o", "bind,ro,nosuid", "/src", "/dst"},
			[]call{
				{"/src", "/dst", "", syscall.MS_BIND | syscall.MS_RDONLY | syscall.MS_NOSUID, ""},
				{"/src", "/dst", "", bindRemount | syscall.MS_RDONLY | syscall.MS_NOSUID, ""},
			}},
		{"kubelet's second bind call", []string{"-o", "bind,remount,ro", "/src", "/dst"},
			[]call{{"/src", "/dst", "", bindRemount | syscall.MS_RDONLY, ""}}},
		{"mount flags and -t before options", []string{"--no-canonicalize", "-t", "ext4", "-o", "defaults,noatime", "/dev/vdb", "/mnt"},
			[]call{{"/dev/vdb", "/mnt", "ext4", syscall.MS_NOATIME, ""}}},
		{"later option wins", []string{"-t", "tmpfs", "-o", "ro,rw", "tmpfs", "/t"},
			[]call{{"tmpfs", "/t", "tmpfs", 0, ""}}},
		{"rbind then rshared", []string{"--rbind", "-o", "rshared", "/a", "/b"},
			[]call{
				{"/a", "/b", "", syscall.MS_BIND | syscall.MS_REC, ""},
				{"none", "/b", "", syscall.MS_SHARED | syscall.MS_REC, ""},
			}},
		{"propagation only", []string{"-o", "rshared", "/var/lib/kubelet"},
			[]call{{"none", "/var/lib/kubelet", "", syscall.MS_SHARED | syscall.MS_REC, ""}}},
		{"remount without source", []string{"-o", "remount,ro", "/mnt"},
			[]call{{"", "/mnt", "", syscall.MS_REMOUNT | syscall.MS_RDONLY, ""}}},
		{"joined short flags", []string{"-ttmpfs", "-osize=1m", "x", "/y"},
			[]call{{"x", "/y", "tmpfs", 0, "size=1m"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := planMount(tt.args)
			if err != nil {
				t.Fatalf("planMount(%q) error = %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("planMount(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestPlanMountErrors(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, "usage"},
		{[]string{"-t"}, "-t needs a value"},
		{[]string{"-x", "a", "b"}, "unsupported flag -x"},
		{[]string{"/dev/vdb", "/mnt"}, "no filesystem type given"},
		{[]string{"-t", "tmpfs", "/mnt"}, "no source for /mnt"},
		{[]string{"a", "b", "c"}, "usage"},
	}
	for _, tt := range tests {
		_, err := planMount(tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("planMount(%q) error = %v, want %q", tt.args, err, tt.wantErr)
		}
	}
}

func TestPlanUmount(t *testing.T) {
	tests := []struct {
		args      []string
		target    string
		flags     int
		wantError bool
	}{
		{[]string{"/mnt"}, "/mnt", 0, false},
		{[]string{"-f", "/mnt"}, "/mnt", syscall.MNT_FORCE, false},
		{[]string{"-l", "-f", "/mnt"}, "/mnt", syscall.MNT_FORCE | syscall.MNT_DETACH, false},
		{[]string{"-R", "/mnt"}, "", 0, true},
		{[]string{}, "", 0, true},
		{[]string{"/a", "/b"}, "", 0, true},
	}
	for _, tt := range tests {
		target, flags, err := planUmount(tt.args)
		if (err != nil) != tt.wantError {
			t.Errorf("planUmount(%q) error = %v, want error %v", tt.args, err, tt.wantError)
			continue
		}
		if target != tt.target || flags != tt.flags {
			t.Errorf("planUmount(%q) = %q, %#x, want %q, %#x", tt.args, target, flags, tt.target, tt.flags)
		}
	}
}
