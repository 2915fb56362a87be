package main

import (
	"strings"
)

// tcgModelName is the model name QEMU gives its "max" CPU under TCG, its emulator (under KVM the same
// model shows the host's name). It is the CPU model Cairn's launcher and tests boot with.
const tcgModelName = "QEMU TCG CPU"

// tcgGoDebug turns off the Go runtime's and standard library's AVX2 code paths. QEMU 7.2 emulates AVX2
// one helper call at a time, so under it these paths are slower than the plain ones they replace:
// measured with Go 1.26 under QEMU's TCG, SHA-256 hashes 16.8 MB/s with AVX2 and 37.5 MB/s without
// (and on the host, with SHA-NI, the setting changes nothing). machined hashes the whole payload before
// it mounts it, on every Init, Join and boot into Running, and containerd hashes every blob it imports;
// the kube binary's start-up took the same time either way.
const tcgGoDebug = "cpu.avx2=off"

// emulationEnv returns env for machined (which passes GODEBUG on to containerd): with tcgGoDebug added
// to GODEBUG when cpuinfo (/proc/cpuinfo) shows QEMU's emulated CPU, unchanged otherwise, and
// unchanged when the kernel command line already set GODEBUG (the operator's setting wins).
func emulationEnv(cpuinfo []byte, env []string) []string {
	if !emulatedCPU(string(cpuinfo)) {
		return env
	}
	for _, e := range env {
		if strings.HasPrefix(e, "GODEBUG=") {
			return env
		}
	}
	return append(env[:len(env):len(env)], "GODEBUG="+tcgGoDebug)
}

// emulatedCPU reports whether the first CPU's model name is QEMU's emulated one.
func emulatedCPU(cpuinfo string) bool {
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.HasPrefix(strings.TrimSpace(v), tcgModelName)
		}
	}
	return false
}
