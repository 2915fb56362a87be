#!/bin/bash
# Builds the image through the Dockerfile with buildah, on a machine with no Docker engine and no image
# registry: the Dockerfile's BASE (Debian 12 with Go 1.26) is made locally with debootstrap from Debian's
# packages and this machine's own Go toolchain, then `buildah bud` runs the Dockerfile (which runs
# hack/build-image.sh, the same script as `make image`) and writes the artifacts to _out/docker.
# The host's Go module and build caches are mounted into the build so that it does not compile
# Kubernetes again from nothing; without them the build is the same, only slower. Isolation is chroot:
# this machine is a cgroup v1/v2 hybrid, which crun refuses, and chroot needs no OCI runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
base=localhost/cairn-build-base:bookworm-go1.26
out=${1:-_out/docker}
step() { printf '==> %s\n' "$*"; }

command -v buildah >/dev/null && command -v debootstrap >/dev/null ||
	apt-get install -y -qq buildah debootstrap crun
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
	step "making the base image $base (debootstrap bookworm + $(go version | cut -d' ' -f3))"
	root=$(mktemp -d)
	trap 'rm -rf "$root"' EXIT
	debootstrap --variant=minbase bookworm "$root" >/dev/null
	cp -a "$(go env GOROOT)" "$root/usr/local/go"
	ctr=$(buildah from scratch)
	mnt=$(buildah mount "$ctr")
	cp -a "$root/." "$mnt/"
	buildah umount "$ctr" >/dev/null
	buildah config --env PATH=/usr/local/go/bin:/root/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--env GOPATH=/root/go --env GOTOOLCHAIN=local "$ctr"
	buildah commit -q "$ctr" "$base" >/dev/null
	buildah rm "$ctr" >/dev/null
fi

step "buildah bud (Dockerfile, BASE=$base) -> $out"
mkdir -p "$out"
start=$(date +%s)
buildah bud --isolation chroot --network host --build-arg BASE="$base" \
	-v "$(go env GOMODCACHE):/root/go/pkg/mod" -v "$(go env GOCACHE):/root/.cache/go-build" \
	-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca.crt:ro --build-arg SSL_CERT_FILE=/etc/ssl/host-ca.crt \
	--output "type=local,dest=$out" .
step "built in $(( $(date +%s) - start ))s:"
ls -l "$out"
