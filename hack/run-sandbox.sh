#!/bin/bash
# Starts a sandbox node (machined as an ordinary process under a scratch root), generates a cluster's
# configs, inits the node through cairnctl and shows it Running. The node keeps running; the script prints
# how to talk to it and how to stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${CAIRN_SANDBOX:-$PWD/_out/sandbox}
port=${CAIRN_PORT:-50000}
ctl=$PWD/_out/cairnctl
step() { printf '\n==> %s\n' "$*"; }

if [ -f "$dir/machined.pid" ] && kill -0 "$(cat "$dir/machined.pid")" 2>/dev/null; then
	step "stopping the previous sandbox node (pid $(cat "$dir/machined.pid"))"
	kill "$(cat "$dir/machined.pid")"; sleep 1
fi
rm -rf "$dir"; mkdir -p "$dir/root"
token=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')

step "starting machined in sandbox mode: --root $dir/root --listen 127.0.0.1:$port"
_out/machined --root "$dir/root" --listen "127.0.0.1:$port" --token "$token" >"$dir/machined.log" 2>&1 &
echo $! >"$dir/machined.pid"
for _ in $(seq 50); do grep -q fingerprint= "$dir/machined.log" && break; sleep 0.1; done
fp=$(sed -n 's/.*fingerprint=\([0-9a-f]*\).*/\1/p' "$dir/machined.log" | head -1)
[ -n "$fp" ] || { cat "$dir/machined.log"; exit 1; }
echo "certificate fingerprint: $fp"

step "generating the cluster's configs in $dir"
(cd "$dir" && "$ctl" gen config --cluster-name sandbox --endpoint "https://127.0.0.1:6443" \
	--state-disk tmpfs --ephemeral-disk tmpfs --etcd-disk tmpfs)

maint=(--nodes "127.0.0.1:$port" --token "$token" --fingerprint "$fp")
step "the node in maintenance mode: cairnctl --token ... --fingerprint ... status"
"$ctl" "${maint[@]}" status

step "cairnctl init --config controlplane.yaml"
"$ctl" "${maint[@]}" init --config "$dir/controlplane.yaml"

step "the node after Init, over mutual TLS: cairnctl --cairnconfig $dir/cairnconfig status"
"$ctl" --cairnconfig "$dir/cairnconfig" --nodes "127.0.0.1:$port" status

cat <<MSG

The sandbox node is running (pid $(cat "$dir/machined.pid"), log $dir/machined.log). Talk to it with:
  export CAIRNCONFIG=$dir/cairnconfig
  _out/cairnctl --nodes 127.0.0.1:$port services
  _out/cairnctl --nodes 127.0.0.1:$port events
Stop it with: _out/cairnctl --nodes 127.0.0.1:$port shutdown
MSG
