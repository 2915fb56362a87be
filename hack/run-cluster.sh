#!/bin/bash
# `make run`: builds the image (and the Kubernetes bundle, cached), boots a one-node Cairn cluster in QEMU
# with `cairnctl cluster create`, and shows its Kubernetes node Ready with the bundle's own kubectl. The VM
# keeps running; the script ends with how to talk to it and how to stop it.
#   CAIRN_CLUSTER (default "dev"), CAIRN_WORKERS (default 0), CAIRN_STATE_DIR (default _out/clusters).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${CAIRN_CLUSTER:-dev}
workers=${CAIRN_WORKERS:-0}
state=${CAIRN_STATE_DIR:-$PWD/_out/clusters}
step() { printf '\n==> %s\n' "$*"; }

step "building the image (make image; the bundle is cached once built) and the example workload's image"
make --no-print-directory image example-image
./hack/deps.sh qemu

ctl=$PWD/_out/cairnctl
ln -sf bundle/bin/kubectl _out/kubectl
if "$ctl" cluster list --state-dir "$state" -o json | grep -q "\"name\": \"$name\""; then
	step "destroying the previous cluster $name"
	"$ctl" cluster destroy --name "$name" --state-dir "$state"
fi

step "cairnctl cluster create --name $name --workers $workers (QEMU, TCG: a few minutes)"
"$ctl" cluster create --name "$name" --workers "$workers" --state-dir "$state" --image-dir "$PWD/_out"

kc=$state/$name/kubeconfig
step "cairnctl health"
# Under emulation on a busy host the add-ons can take minutes after the node is Ready.
"$ctl" --cairnconfig "$state/$name/cairnconfig" health --wait 15m
step "kubectl get nodes"
for _ in $(seq 60); do
	_out/kubectl --kubeconfig "$kc" get nodes --no-headers 2>/dev/null | grep -q ' Ready ' && break
	sleep 5
done
_out/kubectl --kubeconfig "$kc" get nodes -o wide
step "kubectl get pods -A"
_out/kubectl --kubeconfig "$kc" get pods -A -o wide

cat <<MSG

The cluster $name is running. Talk to it with:
  export CAIRNCONFIG=$state/$name/cairnconfig KUBECONFIG=$kc
  _out/cairnctl services          _out/cairnctl logs kubelet
  _out/kubectl get pods -A
Run an app the node does not carry, expose it and reach it by name from a pod:
  _out/cairnctl image import _out/examples/hello.tar
  _out/kubectl create deployment hello --image=example.local/hello:v1 --replicas=2 --port=8080
  _out/kubectl rollout status deployment hello --timeout=2m
  _out/kubectl expose deployment hello --port=80 --target-port=8080
  _out/kubectl run client --restart=Never --image=example.local/hello:v1 -- probe --count 4 --get http://hello.default.svc.cluster.local
  _out/kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/client --timeout=2m; _out/kubectl logs client
Stop it with: _out/cairnctl cluster destroy --name $name --state-dir $state
MSG
