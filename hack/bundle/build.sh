#!/usr/bin/env bash
# Builds the Kubernetes bundle into _out/bundle (see image/bundle/README.md). The Go builder skips
# everything when its stamp says nothing changed. Usage: hack/bundle/build.sh [--force] [--out DIR]
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
"$repo/hack/deps.sh" bundle # runc links libseccomp statically
cd "$repo/image/bundle"
exec go run ./cmd/bundle --out "$repo/_out/bundle" "$@"
