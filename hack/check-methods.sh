#!/usr/bin/env bash
# Fails when machined or cairnctl link a call that looks methods up by name through reflection
# (text/template's field evaluation, reflect.Value.MethodByName): the linker then keeps every exported
# method of every type in the binary, 7 MB of machined's 25. Names the chain that reaches it.
set -euo pipefail
cd "$(dirname "$0")/.."
tags=${GOTAGS:-grpcnotrace}
status=0
for pkg in ./machined ./cairnctl; do
	dep=$(mktemp)
	go build -trimpath -tags "$tags" -ldflags=-dumpdep -o /dev/null "$pkg" 2>"$dep"
	if grep -q '<ReflectMethod>' "$dep"; then
		echo "$pkg: the linker keeps every exported method; what looks methods up by name:"
		grep '<ReflectMethod> ->' "$dep" | cut -d' ' -f1 | sort -u | sed 's/^/  /'
		status=1
	fi
	rm -f "$dep"
done
exit $status
