// Command kubectl is upstream's kubectl at the pinned Kubernetes version, for
// the host: the tests, `make run`'s _out/kubectl and conformance runs use it.
// No node runs kubectl, so it is a binary of its own rather than a name of
// the kube multi-call binary, whose every component would otherwise run
// kubectl's package initialisation at each start (see ../main.go).
//
// It mirrors upstream's cmd/kubectl: verbosity is parsed before the command
// is built so klog works while kubectl reads its plugins and .kuberc.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // client auth plugins, as upstream's
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck // upstream ignores it too
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err) // prints and exits non-zero
	}
}
