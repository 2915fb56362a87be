#!/usr/bin/env bash
# make bench: Cairn's figures on this machine. It prints and never asserts a time.
#
#   The boot row: the floor (the same kernel with a trivial init answering on port 50000, built by the
#   bench) and Cairn booted alternately, CAIRN_BENCH_RUNS times each (default 5), in the same VM (q35 +
#   the PVH vmlinux, 1 vCPU, 2 GiB, TCG): median [min–max] of each and the ratio of the medians. Then, on
#   one node shaped as cluster create makes it (microvm, 2 vCPUs): Status latency, machined RSS in Boot,
#   Init to Running (node Ready) and to CoreDNS ready, and the RSS of machined and the services then.
#   Image sizes, and the machine it ran on with its load. Then the native-speed row (hack/bench/native.sh):
#   the same machined and payload as a sandbox node on this host, inited once (root only).
#
# Printed as a table and written as JSON to _out/bench/bench-TIME.json (and latest.json), with the
# console of the median boot of each kind stamped with the host's clock (where the boot's time went).
#
# The figures are made by TestBench in cairnctl/internal/cluster (build tag bench): it boots VMs with the
# same launcher and wait code as `cairnctl cluster create`, which Go's internal rule keeps in cairnctl/.
# Environment: CAIRN_BENCH_RUNS (boots per kind, default 5), CAIRN_BENCH_SETTLE (when after Init to measure
# memory again, default 10m, 0 to skip), CAIRN_BENCH_INIT=0 (skip Init, which takes minutes, and the
# native-speed row), CAIRN_BENCH_NATIVE=0 (skip the native-speed row), CAIRN_IMAGE_DIR (default _out),
# CAIRN_BENCH_COMPARE (other image directories, comma-separated, booted in the same rounds with a row each:
# two builds against the same floor), CAIRN_KERNEL_ROOT (the kernel root the image was built with, make
# kernel's: the floor is built with it too, so it boots the same kernel; make bench KERNEL_ROOT=... sets it).
# A busy host slows every emulated boot: run it on an idle machine, and compare Cairn with the floor of the
# same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
for f in vmlinux initramfs.cpio.zst payload.squashfs; do
	if [[ ! -e "${CAIRN_IMAGE_DIR:-_out}/$f" ]]; then
		echo "bench: ${CAIRN_IMAGE_DIR:-_out}/$f is missing: build the image with 'make image'" >&2
		exit 1
	fi
done
echo "bench: started $(date -u +%FT%TZ) at $(git describe --always --dirty 2>/dev/null || echo unknown), load $(cut -d' ' -f1-3 /proc/loadavg)"
# -v shows the figures as they come; the test framework's own lines are dropped.
go test -tags bench -run '^TestBench$' -count=1 -timeout 90m -v ./cairnctl/internal/cluster/ |
	grep --line-buffered -v -E '^(=== RUN|--- PASS|PASS$|ok  )'
[ "${CAIRN_BENCH_INIT:-1}" = 0 ] || ./hack/bench/native.sh
