#!/bin/bash
# `make conformance`: Kubernetes' conformance suite (e2e.test's [Conformance] tests, at the pinned version)
# against a Cairn cluster, with nothing pulled from the internet.
#
#   1. builds e2e.test, ginkgo and every test image the suite runs (image/bundle/conformance; cached);
#   2. starts the cluster: by default a sandbox node (machined with the real payload, at native speed) in a
#      network namespace of its own; with CLUSTER=qemu a QEMU cluster of one control plane and one worker;
#   3. imports the test images on every node with `cairnctl image import`;
#   4. runs the suite with ginkgo and prints "N passed, N failed, N skipped" and the failed tests' names;
#      the JUnit report and the suite's log are under _out/conformance/report.
#
# Settings (environment):
#   CLUSTER=sandbox|qemu   where to run (default sandbox; qemu runs a focused subset by default)
#   FOCUS=REGEX            tests to run (default '\[Conformance\]'; with CLUSTER=qemu ten chosen tests of
#                          sig-network, sig-node and sig-apps, and the two-node one)
#   SKIP=REGEX             tests to leave out besides the skip file (default '\[Disruptive\]')
#   PARALLEL=N             ginkgo processes (default 8: most tests wait on timers, not on the CPU;
#                          [Serial] tests still run alone, at the end; 2 with CLUSTER=qemu)
#   KEEP=1                 leave the cluster running afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
out=$repo/_out/conformance
run=$out/run
report=$out/report
ctl=$repo/_out/cairnctl
cluster=${CLUSTER:-sandbox}
parallel=${PARALLEL:-8}
[ "$cluster" = qemu ] && parallel=${PARALLEL:-2} # emulated nodes: two tests at a time, so the control plane keeps up
skip=${SKIP:-'\[Disruptive\]'}
step() { printf '\n==> %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

# One run at a time: a second one would share the node's directory, network namespace and addresses, and
# stopping either would stop the other's node.
mkdir -p "$out"
exec 9>"$out/run.lock"
if ! flock -n 9; then
	echo "conformance: another make conformance is running (lock $out/run.lock held); wait for it or stop it" >&2
	exit 1
fi

case "$cluster" in
sandbox) focus=${FOCUS:-'\[Conformance\]'} ;;
# Under TCG on two cores the QEMU cluster runs a few tests an hour in parallel, not hundreds: its default is
# ten chosen tests of sig-network, sig-node and sig-apps, two of them needing two nodes.
qemu) focus=${FOCUS:-'\[sig-network\] DNS should provide DNS for the cluster|\[sig-network\] Services should serve a basic endpoint from pods|\[sig-network\] Services should be able to create a functioning NodePort service|\[sig-network\] Networking Granular Checks: Pods should function for intra-pod communication: http|\[sig-node\] Secrets should be consumable via the environment|\[sig-node\] Pods should be submitted and removed|\[sig-node\] Container Runtime blackbox test on terminated container should report termination message from file when pod succeeds and TerminationMessagePolicy FallbackToLogsOnError is set|\[sig-apps\] Deployment RollingUpdateDeployment should delete old pods and create new ones|\[sig-apps\] Daemon set should rollback without unnecessary restarts|\[sig-architecture\] Conformance Tests should have at least two untainted nodes'} ;;
*) echo "conformance: CLUSTER=$cluster: want sandbox or qemu" >&2; exit 2 ;;
esac
# The skip file: tests that cannot pass on this machine for a reason outside Cairn, one regular
# expression per line with the reason in a comment above it; a line that starts with "sandbox: " applies to
# the sandbox target only (a one-node cluster).
while IFS= read -r line; do
	case "$line" in '' | '#'*) continue ;; esac
	case "$line" in
	'sandbox: '*) [ "$cluster" = sandbox ] || continue; line=${line#sandbox: } ;;
	esac
	skip="$skip|$line"
done <hack/conformance-skip.txt

step "building e2e.test, ginkgo and the test images (cached)"
./hack/deps.sh conformance
mkdir -p "$out"
(cd image/bundle/conformance && go build -o "$out/conformance" ./cmd/conformance && "$out/conformance" build -out "$out" -bundle "$repo/_out/bundle")
mkdir -p "$run" "$out/path"
ln -sf "$repo/_out/bundle/bin/kubectl" "$out/path/kubectl"

# --- the cluster --------------------------------------------------------------------------------------
netns=cairn-conformance
nodeip=10.232.0.2
stop_sandbox() {
	if [ -f "$run/registry.pid" ]; then kill "$(cat "$run/registry.pid")" 2>/dev/null || true; rm -f "$run/registry.pid"; fi
	./hack/sandbox-node.sh stop "$run" "$netns"
}

start_sandbox() {
	stop_sandbox
	rm -rf "$run"/*.yaml "$run/cairnconfig" "$run/kubeconfig"
	./hack/sandbox-node.sh start "$run" "$netns" 10.232.0 conformance
	# The test images over the registry protocol, on this side of the veth pair, as the node's mirror for
	# every registry they are named after (see image/bundle/conformance/cmd/conformance/registry.go).
	"$out/conformance" registry -listen 10.232.0.1:5000 -archive "$out/images.tar" >"$run/registry.log" 2>&1 &
	echo $! >"$run/registry.pid"
	for _ in $(seq 300); do grep -q serving "$run/registry.log" && break; sleep 0.2; done
	grep -q serving "$run/registry.log" || { cat "$run/registry.log"; exit 1; }
	(cd "$run" && "$ctl" gen config --cluster-name conformance --endpoint "https://$nodeip:6443" \
		--state-disk tmpfs --ephemeral-disk tmpfs --etcd-disk tmpfs >/dev/null)
	mirrors="  registries:"
	for host in $(cut -d/ -f1 "$out/images.txt" | sort -u); do
		mirrors="$mirrors\n    $host:\n      mirrors: [\"http://10.232.0.1:5000\"]"
	done
	sed -i "s|^  type: controlplane\$|&\n$mirrors|" "$run/controlplane.yaml"
	"$ctl" --nodes "$nodeip:50000" --token conformance --insecure-skip-verify init --config "$run/controlplane.yaml"
	cairn=(--cairnconfig "$run/cairnconfig" --nodes "$nodeip:50000")
	"$ctl" "${cairn[@]}" health --wait 10m
	"$ctl" "${cairn[@]}" kubeconfig "$run/kubeconfig"
	kubeconfig=$run/kubeconfig
}

start_qemu() {
	make --no-print-directory image
	./hack/deps.sh qemu
	state=$run/clusters
	"$ctl" cluster destroy --name conformance --state-dir "$state" 2>/dev/null || true
	"$ctl" cluster create --name conformance --workers 1 --state-dir "$state" --image-dir "$repo/_out"
	"$ctl" --cairnconfig "$state/conformance/cairnconfig" health --wait 20m
	kubeconfig=$state/conformance/kubeconfig
	nodes=$("$ctl" cluster list --state-dir "$state" -o json | sed -n 's/.*"apiEndpoint": "\([^"]*\)".*/\1/p' | paste -sd, -)
	cairn=(--cairnconfig "$state/conformance/cairnconfig" --nodes "$nodes")
}

stop_cluster() {
	[ "${KEEP:-}" = 1 ] && { echo "KEEP=1: the cluster keeps running (kubeconfig $kubeconfig)"; return; }
	case "$cluster" in
	sandbox) stop_sandbox ;;
	qemu) "$ctl" cluster destroy --name conformance --state-dir "$run/clusters" || true ;;
	esac
}

step "starting the cluster ($cluster)"
kubeconfig=
trap stop_cluster EXIT
"start_$cluster"

step "importing the test images on every node"
"$ctl" "${cairn[@]}" image import "$out/images.tar"
# Unpacking hundreds of MB is minutes of CPU on an emulated node: the suite starts once the nodes answer
# their health checks again, and any control-plane container that restarted meanwhile is shown.
"$ctl" "${cairn[@]}" health --wait 10m
KUBECONFIG=$kubeconfig "$repo/_out/bundle/bin/kubectl" get pods -n kube-system -o wide

# --- the suite ----------------------------------------------------------------------------------------
step "running e2e.test: focus '$focus', skip '$skip', $parallel processes"
rm -rf "$report" && mkdir -p "$report"
start=$(date +%s)
# The QEMU nodes' vCPUs come first on this host: the suite's own processes (a client that mostly waits)
# take the time the nodes leave.
yield=()
[ "$cluster" = qemu ] && yield=(nice -n 10)
set +e
PATH=$out/path:$PATH "${yield[@]}" "$out/bin/ginkgo" --procs="$parallel" --timeout=3h --no-color --silence-skips \
	--focus="$focus" --skip="$skip" --junit-report=junit.xml --output-dir="$report" \
	"$out/bin/e2e.test" -- --provider=skeleton --kubeconfig="$kubeconfig" --report-dir="$report" \
	--e2e-output-dir="$report" --minStartupPods=1 2>&1 | tee "$report/e2e.log" | grep -E '^\s*(•|\[(FAIL|PANICKED|TIMEDOUT)\]|Ran |FAIL!|SUCCESS!)' || true
set -e
took=$(( $(date +%s) - start ))

step "result ($((took / 60)) min $((took % 60)) s; the log is $report/e2e.log)"
"$out/conformance" summary "$report/junit.xml"
