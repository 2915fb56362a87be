#!/usr/bin/env bash
# make bench: Cairn's figures on this machine. It prints and never asserts a time.
#
#   boot to the first Status call (5 boots, vmlinux/microvm) and, for comparison, the same kernel with a
#   trivial init answering on port 50000; Status latency; machined RSS in Boot; Init to Running in QEMU and
#   the RSS of machined, containerd and kubelet then; image sizes; the
#   machine it ran on.
#
# The figures are made by TestBench in cairnctl/internal/cluster (build tag bench): it boots VMs with the
# same launcher and wait code as `cairnctl cluster create`, which Go's internal rule keeps in cairnctl/.
# Environment: CAIRN_BENCH_RUNS (boots per figure, default 5), CAIRN_BENCH_INIT=0 (skip Init, which takes
# minutes), CAIRN_IMAGE_DIR (default _out).
set -euo pipefail
cd "$(dirname "$0")/../.."
for f in vmlinux initramfs.cpio.zst; do
	if [[ ! -e "${CAIRN_IMAGE_DIR:-_out}/$f" ]]; then
		echo "bench: ${CAIRN_IMAGE_DIR:-_out}/$f is missing: build the image with 'make image'" >&2
		exit 1
	fi
done
echo "bench: started $(date -u +%FT%TZ) at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
# -v shows the figures as they come; the test framework's own lines are dropped.
go test -tags bench -run '^TestBench$' -count=1 -timeout 90m -v ./cairnctl/internal/cluster/ |
	grep -v -E '^(=== RUN|--- PASS|PASS$|ok  )'
