package flanneld

import (
	"context"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flannel-io/flannel/pkg/ip"
	"k8s.io/klog/v2"
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
			check: func(flannelOpts) bool { return klog.V(2).Enabled() && !klog.V(3).Enabled() },
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
			t.Cleanup(func() { _, _ = parse([]string{"--kube-subnet-mgr", "--v=0"}) }) // klog's verbosity is global
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

// fakeAPI answers the Node list, watch and get that flannel's subnet manager makes with one Node. A
// watch gets the Node and the bookmark that ends the initial events (client-go's streaming list), then
// stays open until the test ends.
func fakeAPI(t *testing.T) *httptest.Server {
	node := `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","resourceVersion":"1"},"spec":{"podCIDR":"10.244.1.0/24"}}`
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/v1/nodes" && r.URL.Query().Get("watch") == "true":
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", node)
			fmt.Fprint(w, `{"type":"BOOKMARK","object":{"kind":"Node","apiVersion":"v1","metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		case r.URL.Path == "/api/v1/nodes":
			fmt.Fprintf(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[%s]}`, node)
		case r.URL.Path == "/api/v1/nodes/n1":
			fmt.Fprint(w, node)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // first: Close waits for the open watches
	return srv
}

// A flanneld that cannot start returns its error, having stopped its healthz server: hanging there, it
// would keep answering the kubelet's liveness probe and never be restarted.
func TestFailedStartReturns(t *testing.T) {
	api := fakeAPI(t)
	conf := filepath.Join(t.TempDir(), "net-conf.json")
	if err := os.WriteFile(conf, []byte(`{"Network":"10.244.0.0/16","EnableNFTables":true,"Backend":{"Type":"vxlan"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODE_NAME", "n1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	o, err := parse([]string{"--kube-subnet-mgr", "--kube-api-url=" + api.URL, "--net-config-path=" + conf,
		"--iface=cairn-no-such-if", "--healthz-ip=127.0.0.1", "--healthz-port=" + strconv.Itoa(port)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- flanneld(context.Background(), o) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no interface matches") {
			t.Errorf("flanneld(no such interface) = %v, want the interface named as the cause", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("flanneld(no such interface) did not return")
	}
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
		t.Errorf("the healthz server still listens after flanneld returned")
	}
}
