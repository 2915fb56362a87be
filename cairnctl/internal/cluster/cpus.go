package cluster

// DefaultCPUs is how many vCPUs each control plane and each worker gets when the user does not say,
// for a cluster of controlPlanes and workers on a host of hostCPUs cores.
//
// QEMU emulates every vCPU with a host thread (TCG). When a guest has two vCPUs and the host runs only
// one of them, the other spins: on a kernel lock its sibling holds, or waiting for the sibling to
// answer a TLB-flush IPI. A control plane and a worker of 2 vCPUs each on a 2-core host lost seconds at
// a time that way once the worker ran pods: the API server failed its probes and was restarted, and
// the controller-manager and the scheduler lost their leases. A control plane of one vCPU is no
// answer either (its API server took nine minutes to become ready), so:
//   - control planes get 2 vCPUs while two each fit the host's cores (1 otherwise: three control
//     planes on two cores);
//   - workers get 2 only if that still fits beside the control planes, else 1: a guest of one vCPU
//     never waits for a sibling, it only runs slower while the host is shared.
func DefaultCPUs(hostCPUs, controlPlanes, workers int) (controlPlane, worker int) {
	hostCPUs = max(hostCPUs, 2)
	controlPlane = 1
	if controlPlanes*2 <= hostCPUs {
		controlPlane = 2
	}
	worker = 1
	if controlPlanes*controlPlane+workers*2 <= hostCPUs {
		worker = 2
	}
	return controlPlane, worker
}
