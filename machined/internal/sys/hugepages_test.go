package sys

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestAnonMappings(t *testing.T) {
	maps := []byte(`00400000-00fbe000 r-xp 00000000 07:00 12 /usr/sbin/machined
01bdb000-01c60000 rw-p 017db000 07:00 12 /usr/sbin/machined
01c60000-03cbe000 rw-p 00000000 00:00 0
03cbe000-03cdf000 rw-p 00000000 00:00 0 [heap]
c000000000-c000400000 rw-p 00000000 00:00 0 [anon: Go: heap]
c000400000-c004000000 ---p 00000000 00:00 0
7f0000000000-7f0000100000 rw-s 00000000 00:01 99 /dev/zero (deleted)
7f0000100000-7f0000200000 r--p 00000000 00:00 0
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
7ffd00100000-7ffd00104000 r--p 00000000 00:00 0 [vvar]
`)
	got := anonMappings(maps)
	want := []mapping{{0x1c60000, 0x3cbe000}, {0x3cbe000, 0x3cdf000}, {0xc000000000, 0xc000400000}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(mapping{})); diff != "" {
		t.Errorf("anonMappings: the writable private anonymous mappings only, not the binary's, the stack's, shared or reserved ones (-want +got):\n%s", diff)
	}
}

// NoHugePages marks a fresh anonymous mapping of the process: the kernel's smaps shows its "nh" flag.
func TestNoHugePages(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no procfs")
	}
	const size = 4 << 20
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	start := uintptr(unsafe.Pointer(&b[0]))
	if flags := vmFlags(t, start); slices.Contains(strings.Fields(flags), "nh") {
		t.Fatalf("a fresh mapping is already marked: %q", flags)
	}
	n, err := NoHugePages()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("NoHugePages() marked no mapping")
	}
	if flags := vmFlags(t, start); !slices.Contains(strings.Fields(flags), "nh") {
		t.Errorf("mapping at %x after NoHugePages: VmFlags %q, want nh among them", start, flags)
	}
}

// AllowHugePages clears the process flag init sets, and says whether it was set.
func TestAllowHugePages(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0); err != nil {
		t.Skipf("prctl PR_SET_THP_DISABLE: %v", err)
	}
	was, err := AllowHugePages()
	if err != nil || !was {
		t.Fatalf("AllowHugePages() = %v, %v; want true, nil", was, err)
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0); err != nil || v != 0 {
		t.Errorf("PR_GET_THP_DISABLE after AllowHugePages = %d, %v; want 0", v, err)
	}
	if was, err := AllowHugePages(); err != nil || was {
		t.Errorf("AllowHugePages() again = %v, %v; want false, nil", was, err)
	}
}

// vmFlags returns the VmFlags line of the mapping that holds addr.
func vmFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			var start, end uintptr
			fmt.Sscanf(lo, "%x", &start)
			fmt.Sscanf(hi, "%x", &end)
			in = start <= addr && addr < end
			continue
		}
		if in && f[0] == "VmFlags:" {
			return strings.Join(f[1:], " ")
		}
	}
	t.Fatalf("no mapping holds %x", addr)
	return ""
}
