#!/usr/bin/env bash
# make bench's native-speed row: the same machined and payload as the image's, run as a sandbox node on this
# host (hack/sandbox-node.sh: no VM, no emulation), inited once through cairnctl. It prints Init → Running
# (node Ready) with Init's longest tasks, and Init → `cairnctl health` passing (CoreDNS ready, a Service
# name resolved), and writes them to _out/bench/native-TIME.json. Those are what the emulated rows would be
# on this machine's CPU without TCG, where issue 13 asks for an estimate. Root only; it prints why it
# skips otherwise. CAIRN_BENCH_NATIVE=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "${CAIRN_BENCH_NATIVE:-1}" = 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "bench: the native-speed row needs root (a sandbox node's namespaces); skipped"
	exit 0
fi
dir=_out/bench/native
name=cairn-bench
ip=10.233.0.2
ctl=$PWD/_out/cairnctl
token=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
trap './hack/sandbox-node.sh stop "$dir" "$name"' EXIT

./hack/sandbox-node.sh start "$dir" "$name" 10.233.0 "$token"
rm -f "$dir"/*.yaml "$dir/cairnconfig"
(cd "$dir" && "$ctl" gen config --cluster-name bench --endpoint "https://$ip:6443" \
	--state-disk tmpfs --ephemeral-disk tmpfs --etcd-disk tmpfs >/dev/null)
echo "bench: native speed: Init of a sandbox node ($dir/machined.log)"
t0=$(date +%s%N)
"$ctl" --nodes "$ip:50000" --token "$token" --insecure-skip-verify init --config "$dir/controlplane.yaml" >"$dir/init.log"
t1=$(date +%s%N)
"$ctl" --cairnconfig "$dir/cairnconfig" --nodes "$ip:50000" health --wait 10m >"$dir/health.log"
t2=$(date +%s%N)

running=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
healthy=$(awk -v a="$t0" -v b="$t2" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
# Init's tasks as machined logged them: "... sequence=init task=NAME outcome=done note=DURATION".
tasks=$(sed -n 's/.*sequence=init task=\([a-z-]*\) outcome=done note=\([0-9.]*[mµn]*s\).*/\1 \2/p' "$dir/machined.log" |
	grep -E '^(containerd|images|etcd-healthy|apiserver-ready|addons|node-ready) ' | paste -sd, - | sed 's/,/, /g')
printf '%-70s %8s s   (%s)\n' "init to Running, node Ready, native speed (sandbox node, this host)" "$running" "$tasks"
printf '%-70s %8s s\n' "init to cairnctl health passing (CoreDNS ready, a name resolved)" "$healthy"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
printf '{"time":"%s","commit":"%s","initToRunningSeconds":%s,"initToHealthySeconds":%s,"tasks":"%s"}\n' \
	"$stamp" "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$running" "$healthy" "$tasks" \
	>"_out/bench/native-$stamp.json"
