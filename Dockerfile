# Builds Cairn's image with Docker (or any OCI builder), producing the same _out/ artifacts as `make image`:
#
#   docker build -o _out .
#
# Both run hack/build-image.sh. BASE is a Debian 12 image with Go 1.26 (the golang image, or a local
# one: see README, "Building with Docker").
ARG BASE=golang:1.26-bookworm
FROM ${BASE} AS build
ENV DEBIAN_FRONTEND=noninteractive GOFLAGS=-buildvcs=false
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends make git ca-certificates && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG VERSION=dev
# A build machine whose TLS goes through its own CA hands the build that CA's bundle (an ARG is in the
# RUN steps' environment; empty, Go uses the image's own roots).
ARG SSL_CERT_FILE=
RUN VERSION=${VERSION} ./hack/build-image.sh

FROM scratch AS artifacts
COPY --from=build /src/_out/vmlinuz /src/_out/vmlinux /src/_out/initramfs.cpio.zst /src/_out/payload.squashfs /src/_out/cairn.iso /src/_out/cairn.raw /src/_out/cairnctl /
