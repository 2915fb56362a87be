// Package flanneld is the kube binary's flannel component: flannel's own
// packages of the pinned version (its Kubernetes subnet manager, its vxlan
// backend, its nftables and iptables rule managers) driven by Main, where
// upstream's main.go also links its etcd subnet manager and eight more
// backends (udp in C, IPsec, WireGuard, host-gw, ...). Cairn renders
// flannel's configuration itself (machined/internal/addons: vxlan,
// --kube-subnet-mgr, nftables), so none of those can be asked for; a
// net-conf.json naming another backend fails, naming it.
//
// As its own binary flanneld was 34 MiB (8.6 MiB of the ISO), most of it the
// Kubernetes client libraries, gRPC and protobuf that kube links anyway; in
// kube it adds 0.6 MB (0.2 MB compressed). The cost is kube's package
// initialisation at each start (92 ms and 12 MB allocated natively, against
// flanneld's 24 ms and 2.8 MB): 13 MB of anonymous memory instead of 5.6 MB,
// while its binary's pages are the kubelet's, already in memory, instead of
// 24 MB of its own.
//
// The flags, their defaults and the FLANNELD_* environment variables are
// upstream's, less the etcd subnet manager's and --ip-blackhole-route; the
// order of the steps (subnet manager, network config, interface, backend,
// rules, subnet.env, /readyz, the node's NetworkUnavailable condition) is
// upstream's main's.
package flanneld

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/pkg/flagutil"
	"github.com/flannel-io/flannel/pkg/backend"
	_ "github.com/flannel-io/flannel/pkg/backend/vxlan" // registers "vxlan"
	"github.com/flannel-io/flannel/pkg/ip"
	"github.com/flannel-io/flannel/pkg/ipmatch"
	"github.com/flannel-io/flannel/pkg/subnet"
	"github.com/flannel-io/flannel/pkg/subnet/kube"
	"github.com/flannel-io/flannel/pkg/trafficmngr"
	"github.com/flannel-io/flannel/pkg/trafficmngr/iptables"
	"github.com/flannel-io/flannel/pkg/trafficmngr/nftables"
	"github.com/flannel-io/flannel/pkg/version"
	"github.com/joho/godotenv"
	"k8s.io/klog/v2"
)

// flannelOpts are flanneld's flags.
type flannelOpts struct {
	kubeSubnetMgr             bool
	kubeAPIURL                string
	kubeAnnotationPrefix      string
	kubeConfigFile            string
	iface, ifaceRegex         stringList
	ifaceCanReach             string
	publicIP, publicIPv6      string
	ipMasq                    bool
	ipMasqRandomFullyDisable  bool
	subnetFile                string
	netConfPath               string
	healthzIP                 string
	healthzPort               int
	iptablesResyncSeconds     int
	iptablesForwardRules      bool
	setNodeNetworkUnavailable bool
	version                   bool
}

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// flannelFlags registers the flags on a new flag set that writes into o.
func flannelFlags(o *flannelOpts) *flag.FlagSet {
	fs := flag.NewFlagSet("flanneld", flag.ContinueOnError)
	fs.BoolVar(&o.kubeSubnetMgr, "kube-subnet-mgr", false, "contact the Kubernetes API for subnet assignment (required: this flanneld has no etcd subnet manager)")
	fs.StringVar(&o.kubeAPIURL, "kube-api-url", "", "Kubernetes API server URL. Does not need to be specified if flannel is running in a pod.")
	fs.StringVar(&o.kubeAnnotationPrefix, "kube-annotation-prefix", "flannel.alpha.coreos.com", `Kubernetes annotation prefix. Can contain single slash "/", otherwise it will be appended at the end.`)
	fs.StringVar(&o.kubeConfigFile, "kubeconfig-file", "", "kubeconfig file location. Does not need to be specified if flannel is running in a pod.")
	fs.Var(&o.iface, "iface", "interface to use (IP or name) for inter-host communication; may be repeated, the first match wins")
	fs.Var(&o.ifaceRegex, "iface-regex", "regex matching the interface to use (IP or name) for inter-host communication; may be repeated, checked after --iface")
	fs.StringVar(&o.ifaceCanReach, "iface-can-reach", "", "use the interface of the route to this IP for inter-host communication")
	fs.StringVar(&o.publicIP, "public-ip", "", "IP accessible by other nodes for inter-host communication")
	fs.StringVar(&o.publicIPv6, "public-ipv6", "", "IPv6 accessible by other nodes for inter-host communication")
	fs.BoolVar(&o.ipMasq, "ip-masq", false, "setup IP masquerade rule for traffic destined outside of overlay network")
	fs.BoolVar(&o.ipMasqRandomFullyDisable, "ip-masq-fully-random-disable", false, "disable fully-random mode for MASQUERADE")
	fs.StringVar(&o.subnetFile, "subnet-file", "/run/flannel/subnet.env", "filename where env variables (subnet, MTU, ... ) will be written to")
	fs.StringVar(&o.netConfPath, "net-config-path", "/etc/kube-flannel/net-conf.json", "path to the network configuration file")
	fs.StringVar(&o.healthzIP, "healthz-ip", "0.0.0.0", "the IP address for healthz server to listen")
	fs.IntVar(&o.healthzPort, "healthz-port", 0, "the port for healthz server to listen(0 to disable)")
	fs.IntVar(&o.iptablesResyncSeconds, "iptables-resync", 5, "resync period for iptables rules, in seconds")
	fs.BoolVar(&o.iptablesForwardRules, "iptables-forward-rules", true, "add default accept rules to FORWARD chain in iptables")
	fs.BoolVar(&o.setNodeNetworkUnavailable, "set-node-network-unavailable", true, "set NodeNetworkUnavailable after ready")
	fs.BoolVar(&o.version, "version", false, "print version and exit")

	// klog's flags that upstream's flanneld offers, logging to stderr as it does.
	kf := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kf)
	for name, value := range map[string]string{"logtostderr": "true", "legacy_stderr_threshold_behavior": "false", "stderrthreshold": "INFO"} {
		_ = kf.Set(name, value) // klog's own flags: these names exist
	}
	for _, name := range []string{"v", "vmodule", "log_backtrace_at"} {
		f := kf.Lookup(name)
		fs.Var(f.Value, f.Name, f.Usage)
	}
	return fs
}

// Main is flanneld's main: it returns the exit code.
func Main() int {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		klog.Errorf("flanneld: %v", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(os.Stderr, version.Version) // upstream prints it there
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := flanneld(ctx, o); err != nil {
		klog.Errorf("flanneld: %v", err)
		return 1
	}
	klog.Info("Exiting cleanly...")
	return 0
}

// parse reads the flags from args, then any flag not given there from its FLANNELD_* variable
// (--ip-masq from FLANNELD_IP_MASQ), as upstream does.
func parse(args []string) (flannelOpts, error) {
	var o flannelOpts
	fs := flannelFlags(&o)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := flagutil.SetFlagsFromEnv(fs, "FLANNELD"); err != nil {
		return o, fmt.Errorf("FLANNELD_* environment: %w", err)
	}
	if !o.kubeSubnetMgr && !o.version {
		return o, errors.New("--kube-subnet-mgr is required: this flanneld takes the subnets from the Kubernetes API and has no etcd subnet manager")
	}
	return o, nil
}

// flanneld runs until ctx ends; every goroutine it starts has ended when it returns.
func flanneld(ctx context.Context, o flannelOpts) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		// Cancel first: on an error the healthz server and the backend's goroutines are still running,
		// and a flanneld that hung here would keep answering /healthz instead of being restarted.
		cancel()
		wg.Wait()
	}()

	sm, err := kube.NewSubnetManager(ctx, o.kubeAPIURL, o.kubeConfigFile, o.kubeAnnotationPrefix, o.netConfPath, o.setNodeNetworkUnavailable)
	if err != nil {
		if os.Getenv("CONT_WHEN_CACHE_NOT_READY") != "true" || !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("create the subnet manager: %w", err)
		}
		klog.Error("Timed out waiting for node controller sync. Continuing anyway.")
	}
	klog.Infof("Created subnet manager: %s", sm.Name())

	var ready atomic.Bool
	if o.healthzPort > 0 {
		serveHealthz(ctx, &wg, net.JoinHostPort(o.healthzIP, strconv.Itoa(o.healthzPort)), &ready)
	}

	config, err := networkConfig(ctx, sm)
	if err != nil {
		return nil // cancelled while waiting
	}
	ipStack, err := ipmatch.GetIPFamily(config.EnableIPv4, config.EnableIPv6)
	if err != nil {
		return err
	}
	if !config.EnableNFTables {
		// Upstream's check: iptables rules see bridged pod traffic only through br_netfilter.
		checks := []struct {
			on   bool
			file string
		}{{config.EnableIPv4, "/proc/sys/net/bridge/bridge-nf-call-iptables"}, {config.EnableIPv6, "/proc/sys/net/bridge/bridge-nf-call-ip6tables"}}
		for _, c := range checks {
			if _, err := os.Stat(c.file); c.on && err != nil {
				return fmt.Errorf("br_netfilter is needed for the iptables rules: %w", err)
			}
		}
	}

	// A public IP annotated on the Node wins over the flag's.
	v4, v6 := sm.GetStoredPublicIP(ctx)
	pub := ipmatch.PublicIPOpts{PublicIP: or(v4, o.publicIP), PublicIPv6: or(v6, o.publicIPv6)}
	extIface, err := externalInterface(o, ipStack, pub)
	if err != nil {
		return err
	}

	be, err := backend.NewManager(ctx, sm, extIface).GetBackend(config.BackendType)
	if err != nil {
		return fmt.Errorf("backend %q (this flanneld carries vxlan only): %w", config.BackendType, err)
	}
	bn, err := be.RegisterNetwork(ctx, &wg, config)
	if err != nil {
		return fmt.Errorf("register the network: %w", err)
	}

	// The other rule manager's rules are removed, should flannel have run with it before.
	if err := trafficManager(!config.EnableNFTables).CleanUp(ctx); err != nil {
		return err
	}
	tm := trafficManager(config.EnableNFTables)
	if err := tm.Init(ctx); err != nil {
		return err
	}
	if o.ipMasq {
		prev, _ := godotenv.Read(o.subnetFile) // none on a node's first start
		err := tm.SetupAndEnsureMasqRules(ctx,
			config.Network, prevIP4(prev, "FLANNEL_SUBNET"), prevIP4(prev, "FLANNEL_NETWORK"),
			config.IPv6Network, prevIP6(prev, "FLANNEL_IPV6_SUBNET"), prevIP6(prev, "FLANNEL_IPV6_NETWORK"),
			bn.Lease(), o.iptablesResyncSeconds, o.ipMasqRandomFullyDisable)
		if err != nil {
			return fmt.Errorf("set up the masquerade rules: %w", err)
		}
	}
	if o.iptablesForwardRules {
		tm.SetupAndEnsureForwardRules(ctx, config.Network, config.IPv6Network, o.iptablesResyncSeconds)
	}

	if err := sm.HandleSubnetFile(o.subnetFile, config, o.ipMasq, bn.Lease().Subnet, bn.Lease().IPv6Subnet, bn.MTU()); err != nil {
		klog.Warningf("Failed to write subnet file: %s", err) // upstream goes on, not ready
	} else {
		klog.Infof("Wrote subnet file to %s", o.subnetFile)
		ready.Store(true)
		klog.Info("flannel is ready")
	}

	klog.Info("Running backend.")
	wg.Add(1)
	go func() {
		defer wg.Done()
		bn.Run(ctx)
	}()
	if err := sm.CompleteLease(ctx, bn.Lease(), &wg); err != nil {
		klog.Errorf("CompleteLease execute error err: %v", err)
	}
	<-ctx.Done()
	klog.Info("Waiting for all goroutines to exit")
	return nil
}

// networkConfig asks for the network's configuration every second until it has one or ctx ends.
func networkConfig(ctx context.Context, sm subnet.Manager) (*subnet.Config, error) {
	for {
		config, err := sm.GetNetworkConfig(ctx)
		switch {
		case err != nil:
			klog.Errorf("Couldn't fetch network config: %s", err)
		case config == nil:
			klog.Warning("Couldn't find network config")
		default:
			klog.Infof("Found network config - Backend type: %s", config.BackendType)
			return config, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// externalInterface is the interface that carries the traffic between nodes: the first of --iface,
// then of --iface-regex, then --iface-can-reach's, or the default route's when none is given.
func externalInterface(o flannelOpts, ipStack int, pub ipmatch.PublicIPOpts) (*backend.ExternalInterface, error) {
	if len(o.iface) == 0 && len(o.ifaceRegex) == 0 && o.ifaceCanReach == "" {
		ext, err := ipmatch.LookupExtIface(or(pub.PublicIP, pub.PublicIPv6), "", "", ipStack, pub)
		if err != nil {
			return nil, fmt.Errorf("find an interface to use: %w", err)
		}
		return ext, nil
	}
	type try struct{ name, regex, canReach string }
	var tries []try
	for _, n := range o.iface {
		tries = append(tries, try{name: n})
	}
	for _, r := range o.ifaceRegex {
		tries = append(tries, try{regex: r})
	}
	if o.ifaceCanReach != "" {
		tries = append(tries, try{canReach: o.ifaceCanReach})
	}
	for _, t := range tries {
		ext, err := ipmatch.LookupExtIface(t.name, t.regex, t.canReach, ipStack, pub)
		if err == nil && ext != nil {
			return ext, nil
		}
		klog.Infof("Could not find valid interface matching %s: %v", t.name+t.regex+t.canReach, err)
	}
	return nil, errors.New("no interface matches --iface, --iface-regex or --iface-can-reach")
}

func trafficManager(nft bool) trafficmngr.TrafficManager {
	if nft {
		return &nftables.NFTablesManager{}
	}
	return &iptables.IPTablesManager{}
}

// serveHealthz serves /healthz (the process is up) and /readyz (the rules are in place and subnet.env
// is written) until ctx ends.
func serveHealthz(ctx context.Context, wg *sync.WaitGroup, addr string, ready *atomic.Bool) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("flanneld is running"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("flanneld is not ready yet"))
			return
		}
		_, _ = w.Write([]byte("flanneld is ready"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	klog.Infof("Start healthz server on %s", addr)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Errorf("healthz server on %s: %v", addr, err)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
}

// prevIP4 and prevIP6 read a network of the subnet file a previous run wrote (zero if none), so the
// masquerade rules of a changed network are replaced rather than added to.
func prevIP4(env map[string]string, key string) ip.IP4Net {
	if _, n, err := net.ParseCIDR(env[key]); err == nil && n.IP.To4() != nil {
		return ip.FromIPNet(n)
	}
	return ip.IP4Net{}
}

func prevIP6(env map[string]string, key string) ip.IP6Net {
	if _, n, err := net.ParseCIDR(env[key]); err == nil && n.IP.To4() == nil {
		return ip.FromIP6Net(n)
	}
	return ip.IP6Net{IP: (*ip.IP6)(big.NewInt(0))}
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
