package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSystem records every effect as a line, and fails the call whose line starts with failOn.
type fakeSystem struct {
	calls  []string
	files  map[string]string
	absent map[string]bool
	failOn string
	loops  int // loop devices attached so far
}

func (f *fakeSystem) do(call string) error {
	f.calls = append(f.calls, call)
	if f.failOn != "" && strings.HasPrefix(call, f.failOn) {
		return errors.New("boom")
	}
	return nil
}

func (f *fakeSystem) Mkdir(dir string) error { return f.do("mkdir " + dir) }
func (f *fakeSystem) Mount(m mount) error {
	return f.do(fmt.Sprintf("mount %s %s %s %#x %s", m.source, m.target, m.fstype, m.flags, m.data))
}
func (f *fakeSystem) KernelRelease() (string, error) { return "6.1.0-test", nil }
func (f *fakeSystem) ReadFile(name string) ([]byte, error) {
	if err := f.do("read " + name); err != nil {
		return nil, err
	}
	s, ok := f.files[name]
	if !ok {
		return nil, fmt.Errorf("open %s: no such file", name)
	}
	return []byte(s), nil
}
func (f *fakeSystem) LoadModule(file, params string) error {
	return f.do(strings.TrimSpace("insmod " + file + " " + params))
}
func (f *fakeSystem) AttachLoop(file string) (string, error) {
	dev := fmt.Sprintf("/dev/loop%d", f.loops)
	f.loops++
	return dev, f.do("losetup " + file)
}
func (f *fakeSystem) Exists(name string) bool {
	f.calls = append(f.calls, "exists "+name)
	return !f.absent[name]
}
func (f *fakeSystem) FreeInitramfs(keep string) error { return f.do("free-initramfs except " + keep) }
func (f *fakeSystem) Chdir(dir string) error          { return f.do("chdir " + dir) }
func (f *fakeSystem) Chroot(dir string) error         { return f.do("chroot " + dir) }
func (f *fakeSystem) NoHugePages() error              { return f.do("no-huge-pages") }
func (f *fakeSystem) Exec(argv0 string, argv, env []string) error {
	return f.do(fmt.Sprintf("exec %s %q %q", argv0, argv, env))
}
func (f *fakeSystem) Logf(string, ...any) {}

const testList = "/lib/modules/6.1.0-test/cairn.load"

func newFake(failOn string) *fakeSystem {
	return &fakeSystem{
		files:  map[string]string{testList: "kernel/drivers/block/loop.ko max_loop=4\nkernel/fs/squashfs/squashfs.ko\n"},
		failOn: failOn,
	}
}

func TestBootSequence(t *testing.T) {
	f := newFake("")
	err := boot(f, []string{"cairn.token=abc", "foo"}, []string{"TERM=linux"})
	if err != nil {
		t.Fatalf("boot() = %v, want nil", err)
	}
	want := []string{
		"mkdir /proc", "mount proc /proc proc 0xe ",
		"mkdir /sys", "mount sysfs /sys sysfs 0xe ",
		"mkdir /dev", "mount devtmpfs /dev devtmpfs 0x2 mode=0755",
		"mkdir /run", "mount tmpfs /run tmpfs 0x6 mode=0755",
		"read " + testList,
		"read /proc/cmdline",
		"insmod /lib/modules/6.1.0-test/kernel/drivers/block/loop.ko max_loop=4",
		"insmod /lib/modules/6.1.0-test/kernel/fs/squashfs/squashfs.ko",
		"losetup /rootfs.squashfs",
		"mkdir /newroot",
		"mount /dev/loop0 /newroot squashfs 0x5 ",
		"losetup /machined.squashfs",
		"mount /dev/loop1 /newroot/usr/lib/cairn/machined squashfs 0x5 ",
		"exists /newroot/sbin/machined",
		"mount /proc /newroot/proc  0x2000 ",
		"mount /sys /newroot/sys  0x2000 ",
		"mount /dev /newroot/dev  0x2000 ",
		"mount /run /newroot/run  0x2000 ",
		"free-initramfs except /newroot",
		"chdir /newroot",
		"mount /newroot /  0x2000 ",
		"chroot .",
		"chdir /",
		"no-huge-pages",
		`exec /sbin/machined ["/sbin/machined" "cairn.token=abc" "foo"] ["TERM=linux" "GODEBUG=disablethp=1"]`,
	}
	if diff := cmp.Diff(want, f.calls); diff != "" {
		t.Errorf("boot() calls (-want +got):\n%s", diff)
	}
}

// The command line's parameters for a module init loads come after the load list's, so they win.
func TestModuleParamsFromCommandLine(t *testing.T) {
	f := newFake("")
	f.files["/proc/cmdline"] = "quiet loop.max_loop=16 squashfs.x=1 ext4.y=2\n"
	if _, err := loadModules(f); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"read " + testList, "read /proc/cmdline",
		"insmod /lib/modules/6.1.0-test/kernel/drivers/block/loop.ko max_loop=4 max_loop=16",
		"insmod /lib/modules/6.1.0-test/kernel/fs/squashfs/squashfs.ko x=1",
	}
	if diff := cmp.Diff(want, f.calls); diff != "" {
		t.Errorf("loadModules calls (-want +got):\n%s", diff)
	}
	f = newFake("insmod /lib/modules/6.1.0-test/kernel/fs/squashfs")
	f.files["/proc/cmdline"] = "squashfs.x=1"
	if _, err := loadModules(f); err == nil || !strings.Contains(err.Error(), `squashfs.ko with parameters "x=1"`) {
		t.Errorf("loadModules with a refused parameter = %v; want the parameters named", err)
	}
}

// machined's heap gets no huge pages unless the command line says otherwise; other GODEBUG settings stay.
func TestMachinedEnv(t *testing.T) {
	for _, tc := range []struct{ env, want []string }{
		{nil, []string{"GODEBUG=disablethp=1"}},
		{[]string{"TERM=linux", "GODEBUG=gctrace=1"}, []string{"TERM=linux", "GODEBUG=gctrace=1,disablethp=1"}},
		{[]string{"GODEBUG=disablethp=0"}, []string{"GODEBUG=disablethp=0"}},
		{[]string{"GODEBUG="}, []string{"GODEBUG=disablethp=1"}},
	} {
		if got := machinedEnv(tc.env); !cmp.Equal(got, tc.want) {
			t.Errorf("machinedEnv(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

// Huge pages are switched off for machined's start exactly when its heap has them off; a kernel that
// refuses does not stop the boot.
func TestHugePagesOff(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want bool
	}{
		{machinedEnv(nil), true},
		{machinedEnv([]string{"GODEBUG=gctrace=1"}), true},
		{machinedEnv([]string{"GODEBUG=disablethp=0"}), false},
		{[]string{"TERM=linux"}, false},
	} {
		if got := hugePagesOff(tc.env); got != tc.want {
			t.Errorf("hugePagesOff(%q) = %v, want %v", tc.env, got, tc.want)
		}
	}
	f := newFake("no-huge-pages")
	if err := boot(f, nil, nil); err != nil {
		t.Fatalf("boot() with a kernel refusing PR_SET_THP_DISABLE = %v, want nil", err)
	}
	if last := f.calls[len(f.calls)-1]; !strings.HasPrefix(last, "exec /sbin/machined") {
		t.Errorf("boot() ended with %q, want machined's exec", last)
	}
	f = newFake("")
	if err := boot(f, nil, []string{"GODEBUG=disablethp=0"}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(f.calls, "no-huge-pages") {
		t.Errorf("boot() switched huge pages off although the command line said disablethp=0")
	}
}

// A failing step stops the sequence and names itself: nothing destructive runs after it.
func TestBootStopsAtFirstError(t *testing.T) {
	tests := []struct {
		failOn  string
		wantErr string
		never   string
	}{
		{"mount proc", "mount proc on /proc: boom", "insmod"},
		{"read", "load modules: boom (does the initramfs belong to kernel 6.1.0-test?)", "losetup"},
		{"insmod /lib/modules/6.1.0-test/kernel/fs/squashfs", "load module kernel/fs/squashfs/squashfs.ko: boom", "losetup"},
		{"losetup", "mount root image: attach /rootfs.squashfs to a loop device: boom", "mkdir /newroot"},
		{"mount /dev/loop0", "mount root image: /dev/loop0 (squashfs) on /newroot: boom", "free-initramfs"},
		{"losetup /machined", "mount machined image: attach /machined.squashfs to a loop device: boom", "free-initramfs"},
		{"mount /dev/loop1", "mount machined image: /dev/loop1 (squashfs) on /newroot/usr/lib/cairn/machined: boom", "free-initramfs"},
		{"free-initramfs", "free initramfs: boom", "chroot"},
		{"exec", "exec /sbin/machined: boom", ""},
	}
	for _, tt := range tests {
		t.Run(tt.failOn, func(t *testing.T) {
			f := newFake(tt.failOn)
			err := boot(f, nil, nil)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("boot() = %v, want %q", err, tt.wantErr)
			}
			for _, c := range f.calls {
				if tt.never != "" && strings.HasPrefix(c, tt.never) {
					t.Errorf("boot() ran %q after the failure", c)
				}
			}
		})
	}
}

func TestBootMissingMachined(t *testing.T) {
	f := &missingMachined{newFake("")}
	err := boot(f, nil, nil)
	if err == nil || err.Error() != "root image has no /sbin/machined" {
		t.Fatalf("boot() = %v, want root image has no /sbin/machined", err)
	}
	for _, c := range f.calls {
		if strings.HasPrefix(c, "free-initramfs") {
			t.Errorf("boot() freed the initramfs although machined is missing")
		}
	}
}

type missingMachined struct{ *fakeSystem }

func (m *missingMachined) Exists(string) bool { return false }
