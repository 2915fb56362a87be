// Command kube is one multi-call binary holding kubelet, kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS (coredns.go)
// and flannel's flanneld (flanneld/). Sharing one binary cuts the bundle to
// about a third of separate ones, and lets the Kubernetes, CoreDNS and
// flannel images share a single layer. CoreDNS and flannel link the same
// Kubernetes client libraries the components do, so CoreDNS adds a sixth of
// its own size and flannel a sixtieth (see image/bundle/README.md).
//
// kubectl is not in it (see kubectl/): every process of a multi-call binary
// runs the package initialisation of all of them, and kubectl's was the
// largest, 24 of its 150-190 ms and 4.4 of its 18 MB allocated natively
// (k8s.io/kubectl/pkg/cmd/options loading kubectl's translations), paid
// again by each component a node starts, for a command no node runs.
//
// It runs the component named by basename(argv[0]) or by its first argument.
// Each entry mirrors the upstream cmd/<component> main of the pinned version
// (CoreDNS's: github.com/coredns/coredns's coredns.go).
package main

import (
	"context"
	"fmt"
	"os"
	_ "time/tzdata" // CronJob time zones (apiserver, controller-manager)

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/cairn-os/cairn/image/bundle/kube/dispatch"
	"github.com/cairn-os/cairn/image/bundle/kube/flanneld"
	"github.com/cairn-os/cairn/image/bundle/kube/proxyenv"
)

var components = map[string]func() int{
	"kube-apiserver": func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kube-proxy": func() int {
		proxyenv.Prepare(os.Stderr) // in nftables mode, skip the iptables clean-up a fresh node does not need
		return cli.Run(proxy.NewProxyCommand())
	},
	"kubelet":  func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"coredns":  runCoreDNS,
	"flanneld": flanneld.Main,
}

func main() {
	known := make([]string, 0, len(components))
	for name := range components {
		known = append(known, name)
	}
	name, args, err := dispatch.Resolve(os.Args, known)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// The components read os.Args themselves (cobra).
	os.Args = args
	if name != "coredns" {
		dropCoreDNSFlags()
	}
	os.Exit(components[name]())
}
