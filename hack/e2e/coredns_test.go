//go:build e2e

package e2e

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitCoreDNSOn waits until CoreDNS's Deployment asks for one replica per node in nodes and a ready one
// runs on each of them, as Cairn keeps it when the config sets no count: one replica on a cluster of one
// node, two spread over the nodes once a second one is Ready (the control planes' pass runs every 30 s,
// then the new pod starts).
func waitCoreDNSOn(t *testing.T, kubeconfig string, nodes ...string) {
	t.Helper()
	waitKubectl(t, kubeconfig, 3*time.Minute, func(out string) bool {
		n, err := strconv.Atoi(strings.TrimSpace(out))
		return err == nil && n == len(nodes)
	}, "-n", "kube-system", "get", "deployment", "coredns", "-o", "jsonpath={.spec.replicas}")
	want := slices.Sorted(slices.Values(nodes))
	waitKubectl(t, kubeconfig, 5*time.Minute, func(out string) bool {
		var ready []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if node, status, ok := strings.Cut(strings.TrimSpace(l), " "); ok && status == "True" {
				ready = append(ready, node)
			}
		}
		slices.Sort(ready)
		return slices.Equal(ready, want)
	}, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns", "-o",
		`jsonpath={range .items[*]}{.spec.nodeName}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
}
