#!/bin/bash
# A sandbox node with the real payload: machined as an ordinary process at native speed, with containerd,
# etcd and the Kubernetes components really started, in a network namespace and a mount namespace of its
# own, so kube-proxy's and flannel's rules, the pods' bridge and containerd's /run never touch this
# machine's. make conformance runs its suite against one, make bench times an Init on one.
#
#   hack/sandbox-node.sh start DIR NAME SUBNET TOKEN   the node's root is DIR/root (wiped first), its log
#                                                      DIR/machined.log; the network namespace NAME holds
#                                                      the node at SUBNET.2/24, reached from here at
#                                                      SUBNET.1; it returns once the machine API listens
#   hack/sandbox-node.sh stop DIR NAME                 stops the node (SIGINT: its shutdown sequence,
#                                                      up to 3 minutes) and removes the namespace
#
# Root only. The node runs _out/machined with --payload _out/payload (make payload).
set -euo pipefail
[ -n "${2:-}" ] && dir=$(realpath -m "$2") # before the cd below: DIR is the caller's
cd "$(dirname "$0")/.."
repo=$PWD

usage() { echo "usage: $0 start DIR NAME SUBNET TOKEN | stop DIR NAME" >&2; exit 2; }
# The host's end of the veth pair: interface names are at most 15 bytes.
hostlink() { printf 'sbx-%.10s' "$1"; }

stop() {
	local dir=$1 name=$2 pid
	if [ -f "$dir/machined.pid" ]; then
		pid=$(cat "$dir/machined.pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill -INT "$pid"
			for _ in $(seq 180); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
		fi
		rm -f "$dir/machined.pid"
	fi
	ip link delete "$(hostlink "$name")" 2>/dev/null || true
	ip netns delete "$name" 2>/dev/null || true
}

start() {
	local dir=$1 name=$2 subnet=$3 token=$4 link
	link=$(hostlink "$name")
	[ -x "$repo/_out/machined" ] && [ -d "$repo/_out/payload" ] || {
		echo "sandbox-node: _out/machined or _out/payload is missing: make payload" >&2
		exit 1
	}
	stop "$dir" "$name"
	rm -rf "$dir/root" && mkdir -p "$dir/root"
	ip netns add "$name"
	ip link add "$link" type veth peer name eth0 netns "$name"
	ip addr add "$subnet.1/24" dev "$link"
	ip link set "$link" up
	ip -n "$name" link set lo up
	ip -n "$name" addr add "$subnet.2/24" dev eth0
	ip -n "$name" link set eth0 up
	ip -n "$name" route add default via "$subnet.1"
	# A private mount namespace with its own /run/containerd and /run/netns (containerd's shims and the
	# pods' network namespaces live there whatever its config says).
	local script="mount --make-rprivate / && mkdir -p /run/containerd /run/netns && mount -t tmpfs tmpfs /run/containerd && mount -t tmpfs tmpfs /run/netns && exec $repo/_out/machined --root $dir/root --listen $subnet.2:50000 --join-listen $subnet.2:50001 --token $token --payload $repo/_out/payload"
	nsenter --net="/run/netns/$name" unshare -m sh -c "$script" >"$dir/machined.log" 2>&1 &
	echo $! >"$dir/machined.pid"
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/$subnet.2/50000") 2>/dev/null && return 0
		kill -0 "$(cat "$dir/machined.pid")" 2>/dev/null || break
		sleep 0.2
	done
	echo "sandbox-node: machined did not listen on $subnet.2:50000; its log ($dir/machined.log) ends:" >&2
	tail -20 "$dir/machined.log" >&2
	exit 1
}

case "${1:-}" in
start) [ $# -eq 5 ] || usage; mkdir -p "$dir"; start "$dir" "$3" "$4" "$5" ;;
stop) [ $# -eq 3 ] || usage; stop "$dir" "$3" ;;
*) usage ;;
esac
