package workload

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFirstSubnet(t *testing.T) {
	p := netip.MustParsePrefix
	for _, c := range []struct {
		name     string
		cluster  string
		bits     int
		reserved netip.Prefix
		want     string
		err      string
	}{
		{name: "the allocator's first", cluster: "10.244.0.0/16", bits: 24, reserved: p("10.96.0.0/12"), want: "10.244.0.0/24"},
		{name: "host bits in the range", cluster: "10.244.7.1/16", bits: 24, want: "10.244.0.0/24"},
		{name: "service range over the first", cluster: "10.0.0.0/16", bits: 24, reserved: p("10.0.0.0/23"), want: "10.0.2.0/24"},
		{name: "IPv6", cluster: "fd00:10:244::/56", bits: 64, reserved: p("fd00:10:96::/112"), want: "fd00:10:244::/64"},
		{name: "IPv6 past the service range", cluster: "fd00::/48", bits: 64, reserved: p("fd00::/63"), want: "fd00:0:0:2::/64"},
		{name: "one subnet", cluster: "10.244.0.0/24", bits: 24, want: "10.244.0.0/24"},
		{name: "all reserved", cluster: "10.244.0.0/23", bits: 24, reserved: p("10.244.0.0/16"), err: "overlaps the service range"},
		{name: "mask shorter than the range", cluster: "10.244.0.0/16", bits: 8, err: "does not fit"},
		{name: "mask past the address", cluster: "10.244.0.0/16", bits: 33, err: "does not fit"},
		{name: "more than 16 bits", cluster: "10.0.0.0/8", bits: 25, err: "more than 16 bits"},
	} {
		got, err := FirstSubnet(p(c.cluster), c.bits, c.reserved)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: FirstSubnet(%s, %d) = %v, %v, want an error with %q", c.name, c.cluster, c.bits, got, err, c.err)
			}
			continue
		}
		if err != nil || got.String() != c.want {
			t.Errorf("%s: FirstSubnet(%s, %d) = %v, %v, want %s", c.name, c.cluster, c.bits, got, err, c.want)
		}
	}
}

func TestClaimFor(t *testing.T) {
	node := func(name, cidr string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
	}
	pods, services := netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/12")
	for _, c := range []struct {
		name  string
		nodes []corev1.Node
		want  string
	}{
		{"the cluster's only node, no PodCIDR", []corev1.Node{node("cp1", "")}, "10.244.0.0/24"},
		{"it has one already", []corev1.Node{node("cp1", "10.244.3.0/24")}, ""},
		{"another node is there (a restored cluster)", []corev1.Node{node("cp1", ""), node("w1", "10.244.0.0/24")}, ""},
		{"the only node is another", []corev1.Node{node("w1", "")}, ""},
		{"not registered yet", nil, ""},
	} {
		got, err := claimFor(c.nodes, "cp1", pods, 24, services)
		if err != nil || got != c.want {
			t.Errorf("%s: claimFor = %q, %v, want %q", c.name, got, err, c.want)
		}
	}
	if _, err := claimFor([]corev1.Node{node("cp1", "")}, "cp1", pods, 8, services); err == nil || !strings.Contains(err.Error(), "cluster.network") {
		t.Errorf("claimFor with a node mask shorter than the pod range: %v, want an error naming cluster.network", err)
	}
}
