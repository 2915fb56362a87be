package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	tcgCPUInfo  = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: QEMU TCG CPU version 2.5+\nflags\t\t: fpu avx avx2\n"
	hostCPUInfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx avx2 sha_ni\n"
)

func TestEmulationEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cpuinfo string
		env     []string
		want    []string
	}{
		{"emulated CPU", tcgCPUInfo, []string{"TERM=linux"}, []string{"TERM=linux", "GODEBUG=cpu.avx2=off"}},
		{"real CPU", hostCPUInfo, []string{"TERM=linux"}, []string{"TERM=linux"}},
		{"no cpuinfo", "", []string{"TERM=linux"}, []string{"TERM=linux"}},
		{"operator's GODEBUG wins", tcgCPUInfo, []string{"GODEBUG=gctrace=1"}, []string{"GODEBUG=gctrace=1"}},
		// "model name" of another CPU than the first does not count (all CPUs of a VM are one model).
		{"first model name only", "model name\t: Intel(R) Xeon\nmodel name\t: QEMU TCG CPU version 2.5+\n", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := emulationEnv([]byte(tc.cpuinfo), tc.env)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("emulationEnv() (-want +got):\n%s", diff)
			}
		})
	}
}

// The caller's slice is not written through: init's environment stays as the kernel gave it.
func TestEmulationEnvCopies(t *testing.T) {
	env := make([]string, 1, 4)
	env[0] = "TERM=linux"
	got := emulationEnv([]byte(tcgCPUInfo), env)
	got[0] = "changed"
	if env[0] != "TERM=linux" || len(env[:cap(env)][1]) != 0 {
		t.Errorf("emulationEnv wrote into its argument: %q", env[:cap(env)])
	}
}
