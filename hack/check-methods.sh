#!/usr/bin/env bash
# Fails when a program links a call that looks methods up by name through reflection (text/template's
# field evaluation, reflect.Value.MethodByName): the linker then keeps every exported method of every
# type in the binary, 7 MB of machined's 25 and 25.6 MB of the bundle's kube's 153. Names the callers.
#
#   hack/check-methods.sh                 machined and cairnctl (make lint; GOTAGS, default grpcnotrace)
#   hack/check-methods.sh DIR PKG...      the packages PKG of the module in DIR (relative to the repository):
#                                         the bundle's integration test checks image/bundle/kube this way
set -euo pipefail
cd "$(dirname "$0")/.."
tags=${GOTAGS:-grpcnotrace}
dir=.
pkgs=(./machined ./cairnctl)
if [ $# -gt 0 ]; then
	dir=$1
	shift
	pkgs=("$@")
fi
cd "$dir"
status=0
for pkg in "${pkgs[@]}"; do
	dep=$(mktemp)
	if ! go build -trimpath -tags "$tags" -ldflags=-dumpdep -o /dev/null "$pkg" 2>"$dep"; then
		grep -v -- ' -> ' "$dep" >&2 || true
		rm -f "$dep"
		exit 2
	fi
	if grep -q '<ReflectMethod>' "$dep"; then
		echo "$dir/$pkg: the linker keeps every exported method; what looks methods up by name:"
		grep '<ReflectMethod> ->' "$dep" | cut -d' ' -f1 | sort -u | sed 's/^/  /'
		status=1
	fi
	rm -f "$dep"
done
exit $status
