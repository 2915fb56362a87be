// CoreDNS, the kube binary's coredns component: CoreDNS of the pinned version
// with a chosen set of its standard plugins (plugin.cfg), registered the way
// upstream's generated
// core/plugin/zplugin.go does: by importing each plugin package for its
// init(). The order plugins run in does not come from this file: it is
// dnsserver.Directives (core/dnsserver/zdirectives.go, generated from the full
// plugin.cfg), which every plugin imports, so the chosen plugins keep the
// standard order. A Corefile naming a plugin left out fails to load ("no
// action found for directive ... (missing a plugin?)") rather than running
// without it.
//
// Left out, because each pulls in a cloud SDK, a database or a tracer that a
// cluster DNS server does not use (measured growth of the stripped CoreDNS
// binary when added back, before CoreDNS joined this binary;
// image/bundle/README.md has the whole table):
//
//	trace      Datadog and Zipkin tracers     +6.3 MiB
//	dnssec     AWS SDK (keys from Secrets     +3.6 MiB
//	           Manager); sign still signs
//	           zones ahead of time
//	route53    AWS SDK                        +2.6 MiB
//	clouddns   Google Cloud API client        +2.5 MiB
//	etcd       etcd v3 client                 +1.5 MiB
//	nomad      Nomad API client               +1.0 MiB
//	azure      Azure SDK                      +0.8 MiB
//	geoip      MaxMind database reader        +0.6 MiB
//	dynupdate  bbolt database                 +0.4 MiB
//
// Left out, because each looks methods up by name at run time, which makes
// Go's linker keep every exported method of every type in the binary (all of
// Kubernetes' generated API code), for every component:
//
//	template   answers from text/template templates
//	view       routes queries by expr-lang expressions
//
// With gRPC's tracing (the grpcnotrace tag) and go-conntrack's (a stand-in,
// conntrack/), they took kube from 127.6 to 153.3 MB (28.0 to 32.0 MB zstd
// -19). Cairn's Corefile uses neither; the bundle's integration test fails
// if anything brings such a lookup back (hack/check-methods.sh).
//
// Everything else in plugin.cfg is kept. quic, https3, grpc_server, grpc and
// proxyproto cost next to nothing: CoreDNS's server core links their
// libraries whatever the plugin set.
package main

import (
	"flag"
	"slices"

	"github.com/coredns/coredns/coremain"

	// Sorted like zplugin.go: the import order changes nothing, the
	// Directives list decides when each plugin runs.
	_ "github.com/coredns/caddy/onevent" // the on directive
	_ "github.com/coredns/coredns/plugin/acl"
	_ "github.com/coredns/coredns/plugin/any"
	_ "github.com/coredns/coredns/plugin/auto"
	_ "github.com/coredns/coredns/plugin/autopath"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/bufsize"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/cancel"
	_ "github.com/coredns/coredns/plugin/chaos"
	_ "github.com/coredns/coredns/plugin/debug"
	_ "github.com/coredns/coredns/plugin/dns64"
	_ "github.com/coredns/coredns/plugin/dnstap"
	_ "github.com/coredns/coredns/plugin/erratic"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/grpc"
	_ "github.com/coredns/coredns/plugin/grpc_server"
	_ "github.com/coredns/coredns/plugin/header"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/https"
	_ "github.com/coredns/coredns/plugin/https3"
	_ "github.com/coredns/coredns/plugin/k8s_external"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/local"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metadata"
	_ "github.com/coredns/coredns/plugin/metrics" // the prometheus directive
	_ "github.com/coredns/coredns/plugin/minimal"
	_ "github.com/coredns/coredns/plugin/multisocket"
	_ "github.com/coredns/coredns/plugin/nsid"
	_ "github.com/coredns/coredns/plugin/pprof"
	_ "github.com/coredns/coredns/plugin/proxyproto"
	_ "github.com/coredns/coredns/plugin/quic"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/root"
	_ "github.com/coredns/coredns/plugin/secondary"
	_ "github.com/coredns/coredns/plugin/shed"
	_ "github.com/coredns/coredns/plugin/sign"
	_ "github.com/coredns/coredns/plugin/siit"
	_ "github.com/coredns/coredns/plugin/timeouts"
	_ "github.com/coredns/coredns/plugin/tls"
	_ "github.com/coredns/coredns/plugin/transfer"
	_ "github.com/coredns/coredns/plugin/tsig"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// runCoreDNS is upstream's main: coremain reads its flags from Go's
// flag.CommandLine.
func runCoreDNS() int {
	coremain.Run()
	return 0
}

// coreDNSGoFlags are the flags coremain registers on Go's flag.CommandLine at
// init. kube-proxy adds every Go flag to its own flag set (for cadvisor's
// --boot-id-file and --machine-id-file), where CoreDNS's -version would
// shadow kube-proxy's --version and -conf, -p and the rest would show in its
// help: every component but CoreDNS runs without them.
var coreDNSGoFlags = []string{"conf", "plugins", "pidfile", "version", "quiet", "log-format", "dns.port", "p"}

// dropCoreDNSFlags replaces flag.CommandLine by a copy without CoreDNS's flags.
func dropCoreDNSFlags() {
	fs := flag.NewFlagSet(flag.CommandLine.Name(), flag.CommandLine.ErrorHandling())
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(coreDNSGoFlags, f.Name) {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	flag.CommandLine = fs
}
