// Command kube is one multi-call binary holding kubelet, kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy, kubectl and CoreDNS
// (coredns.go). Sharing one binary cuts the bundle to about a third of
// separate ones, and lets the Kubernetes and CoreDNS images share a single
// layer. CoreDNS links the same Kubernetes client libraries the components
// do, so it adds a sixth of its own size (see image/bundle/README.md).
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

	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl's client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/cairn-os/cairn/image/bundle/kube/dispatch"
)

var components = map[string]func() int{
	"kube-apiserver": func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kube-proxy":     func() int { return cli.Run(proxy.NewProxyCommand()) },
	"kubelet":        func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kubectl":        runKubectl,
	"coredns":        runCoreDNS,
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
	// The components read os.Args themselves (cobra, kubectl's plugin lookup).
	os.Args = args
	if name != "coredns" {
		dropCoreDNSFlags()
	}
	os.Exit(components[name]())
}

// runKubectl follows upstream cmd/kubectl: verbosity is parsed before the
// command is built so klog works while kubectl reads its plugins and .kuberc.
func runKubectl() int {
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck // upstream ignores it too
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err) // prints and exits non-zero
	}
	return 0
}
