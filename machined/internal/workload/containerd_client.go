package workload

import "github.com/containerd/containerd/v2/client"

// ContainerdClient is the node's containerd client once the workload has started containerd, nil before
// (and after the stop tasks closed it): the image operations of the machine API use it.
func (w *Workload) ContainerdClient() *client.Client { return w.containerdClient() }
