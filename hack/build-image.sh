#!/bin/bash
# Builds every artifact into _out/: machined and cairnctl, the Kubernetes bundle, then the image
# (vmlinuz, vmlinux, initramfs.cpio.zst, payload.squashfs, cairn.efi, cairn.iso, cairn.raw, cairn-gce.tar.gz, cairn-upgrade.tar). `make image` and the Dockerfile both run
# this one script, so the two builds cannot drift apart.
set -euo pipefail
cd "$(dirname "$0")/.."
./hack/deps.sh build bundle image
make build
./hack/bundle/build.sh
go run ./image/cmd/mkimage -out _out -machined _out/machined -bundle _out/bundle ${VERSION:+-version "$VERSION"} ${SIGN_KEY:+-sign-key "$SIGN_KEY"} ${KERNEL_ROOT:+-kernel-root "$KERNEL_ROOT"}
