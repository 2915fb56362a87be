package flanneld

import (
	"flag"
	"math/big"
	"strings"
	"testing"

	"github.com/flannel-io/flannel/pkg/ip"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(flannelOpts) bool
		wantErr string
	}{
		{
			name: "Cairn's DaemonSet",
			args: []string{"--ip-masq", "--kube-subnet-mgr", "--iface=10.0.0.5", "--healthz-port=8081"},
			check: func(o flannelOpts) bool {
				return o.ipMasq && o.kubeSubnetMgr && len(o.iface) == 1 && o.iface[0] == "10.0.0.5" && o.healthzPort == 8081 &&
					o.subnetFile == "/run/flannel/subnet.env" && o.netConfPath == "/etc/kube-flannel/net-conf.json" &&
					o.iptablesForwardRules && o.setNodeNetworkUnavailable && o.iptablesResyncSeconds == 5
			},
		},
		{
			name: "repeated --iface, in order",
			args: []string{"--kube-subnet-mgr", "--iface=eth1", "--iface", "eth0"},
			check: func(o flannelOpts) bool {
				return strings.Join(o.iface, ",") == "eth1,eth0"
			},
		},
		{
			name:  "a flag from the environment",
			args:  []string{"--kube-subnet-mgr"},
			env:   map[string]string{"FLANNELD_IP_MASQ": "true", "FLANNELD_HEALTHZ_PORT": "9000"},
			check: func(o flannelOpts) bool { return o.ipMasq && o.healthzPort == 9000 },
		},
		{
			name:  "the command line wins over the environment",
			args:  []string{"--kube-subnet-mgr", "--healthz-port=8081"},
			env:   map[string]string{"FLANNELD_HEALTHZ_PORT": "9000"},
			check: func(o flannelOpts) bool { return o.healthzPort == 8081 },
		},
		{
			name:  "klog's verbosity",
			args:  []string{"--kube-subnet-mgr", "--v=2"},
			check: func(o flannelOpts) bool { return o.kubeSubnetMgr },
		},
		{
			name:  "--version needs nothing else",
			args:  []string{"--version"},
			check: func(o flannelOpts) bool { return o.version },
		},
		{name: "no etcd subnet manager", args: []string{"--ip-masq"}, wantErr: "--kube-subnet-mgr is required"},
		{name: "an etcd flag", args: []string{"--kube-subnet-mgr", "--etcd-endpoints=http://x:2379"}, wantErr: "etcd-endpoints"},
		{name: "a bad value from the environment", args: []string{"--kube-subnet-mgr"}, env: map[string]string{"FLANNELD_HEALTHZ_PORT": "x"}, wantErr: "FLANNELD_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			o, err := parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse(%q) error = %v, want it to contain %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q) = %v", tt.args, err)
			}
			if !tt.check(o) {
				t.Errorf("parse(%q) = %+v, not what the flags say", tt.args, o)
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	if _, err := parse([]string{"--help"}); err != flag.ErrHelp {
		t.Errorf("parse(--help) error = %v, want flag.ErrHelp (exit 0 with the usage)", err)
	}
}

func TestPrevNetworks(t *testing.T) {
	env := map[string]string{
		"FLANNEL_NETWORK":      "10.244.0.0/16",
		"FLANNEL_SUBNET":       "10.244.1.1/24",
		"FLANNEL_IPV6_NETWORK": "fd00:10:244::/56",
		"FLANNEL_MTU":          "1450",
	}
	if got := prevIP4(env, "FLANNEL_NETWORK").String(); got != "10.244.0.0/16" {
		t.Errorf("prevIP4(FLANNEL_NETWORK) = %s, want 10.244.0.0/16", got)
	}
	if got := prevIP4(env, "FLANNEL_SUBNET").String(); got != "10.244.1.0/24" {
		t.Errorf("prevIP4(FLANNEL_SUBNET) = %s, want 10.244.1.0/24", got)
	}
	if got := prevIP6(env, "FLANNEL_IPV6_NETWORK").String(); got != "fd00:10:244::/56" {
		t.Errorf("prevIP6(FLANNEL_IPV6_NETWORK) = %s, want fd00:10:244::/56", got)
	}
	// A first start has no subnet file: zero networks, which flannel's rule managers read as "none".
	if got := prevIP4(nil, "FLANNEL_SUBNET"); got != (ip.IP4Net{}) {
		t.Errorf("prevIP4(no file) = %v, want the zero network", got)
	}
	if got := prevIP6(nil, "FLANNEL_IPV6_SUBNET"); got.IP == nil || (*big.Int)(got.IP).Sign() != 0 || got.PrefixLen != 0 {
		t.Errorf("prevIP6(no file) = %v, want the zero network", got)
	}
	if got := prevIP6(env, "FLANNEL_NETWORK"); got.PrefixLen != 0 {
		t.Errorf("prevIP6(an IPv4 network) = %v, want the zero network", got)
	}
}
