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

// WorkerNice is the niceness of a worker's QEMU on the host. The control planes' vCPUs then come first
// when the host's cores are short, and a worker runs in the time they leave. Without it a control plane
// of 2 vCPUs and a worker of 1 on two cores shared them evenly while the worker started pods: each
// control-plane vCPU got two thirds of a core, the other one spun waiting for it, and the API server
// answered the controller-manager's lease renewals too late (it lost its lease and restarted, and
// namespaces got no default ServiceAccount). At nice 5 a busy worker still gets a quarter of a core
// against two busy control-plane vCPUs, and all of a core the control plane does not use.
const WorkerNice = 5

// Nice is the niceness of a node's QEMU: WorkerNice for workers, 0 for control planes.
func Nice(role string) int {
	if role == RoleWorker {
		return WorkerNice
	}
	return 0
}
