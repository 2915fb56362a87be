package kube

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Secure ports of the controller-manager and the scheduler (health and metrics, loopback only).
const (
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// Leader election of the controller-manager and the scheduler. A leader renews its lease every retry
// period; every renewal is an etcd write, and at the default 2 s the two leases were four in five of an
// idle control plane's writes, so it is 5 s. A leader that cannot renew within the renew deadline gives
// up and its process exits, and the kubelet starts it again: on a slow machine (emulation, a host that
// steals the CPUs) an API server that stalls for ten seconds, the default deadline, took both down and
// their restarts, heavy on CPU, made the next stall longer. The deadline is 30 s, as long a stall as a
// renewal outlives with six tries; the lease (a new leader's wait after a leader vanished without
// releasing it) is 40 s. A node that reboots takes longer than that to bring its API server back.
const (
	leaderElectRetry = "5s"
	leaderElectRenew = "30s"
	leaderElectLease = "40s"
)

// pkiMount gives a component the PKI directory, read-only.
func (r *Renderer) pkiMount() hostMount {
	return hostMount{name: "k8s-certs", hostPath: r.layout.PKI(), mountPath: containerPKIDir, readOnly: true,
		typ: hostPathType(corev1.HostPathDirectory)}
}

// pkiFileMount gives a component one file of the PKI directory, read-only, at its place in the container.
func (r *Renderer) pkiFileMount(volume, name string) hostMount {
	return hostMount{name: volume, hostPath: r.layout.PKIFile(name), mountPath: inPKI(name), readOnly: true,
		typ: hostPathType(corev1.HostPathFile)}
}

// kubeconfigMount gives a component its kubeconfig file, read-only.
func (r *Renderer) kubeconfigMount(file string) hostMount {
	return hostMount{name: "kubeconfig", hostPath: r.layout.KubernetesFile(file),
		mountPath: containerKubernetesDir + "/" + file, readOnly: true, typ: hostPathType(corev1.HostPathFile)}
}

// etcdServers: the node's own member on loopback and, with discovery names, every member by EtcdName.
// etcd's client spreads requests over both; the name resolves to this node's address first, so they
// stay on this node while its member answers, and go to another member when it does not.
func (r *Renderer) etcdServers() string {
	servers := etcdURL(r.loopback(), EtcdClientPort)
	if r.node.DiscoveryNames {
		servers += "," + etcdURL(r.EtcdName(), EtcdClientPort)
	}
	return servers
}

// etcHostsMount gives a component the node's /etc/hosts itself, read-only, when the node keeps discovery
// names there: the kubelet's copy for host-network pods is made once, when the pod starts, and would
// keep a moved member's old address.
func (r *Renderer) etcHostsMount() []hostMount {
	if !r.node.DiscoveryNames {
		return nil
	}
	return []hostMount{{name: "etc-hosts", hostPath: r.paths.Join("etc", "hosts"), mountPath: "/etc/hosts", readOnly: true,
		typ: hostPathType(corev1.HostPathFile)}}
}

// APIServerPod is kube-apiserver's static pod.
func (r *Renderer) APIServerPod() *corev1.Pod {
	cl := r.cfg.Cluster
	flags := []arg{
		{"advertise-address", r.primary.String()},
		{"allow-privileged", "true"},
		// Never AlwaysAllow: it silently turns anonymous authentication off, and with it the probes.
		{"authorization-mode", "Node,RBAC"},
		{"client-ca-file", inPKI(CACert)},
		{"enable-admission-plugins", "NodeRestriction"},
		{"enable-bootstrap-token-auth", "true"},
		{"etcd-cafile", inPKI(EtcdCACert)},
		{"etcd-certfile", inPKI(APIServerEtcdCert)},
		// Every minute by default the API server reads each of its ~70 resources' object count (for its
		// request cost estimates and the apiserver_storage_objects metric), each a linearizable read
		// that a multi-member etcd confirms with its peers. Counts five minutes old estimate a LIST's
		// cost as well.
		{"etcd-count-metric-poll-period", "5m"},
		{"etcd-keyfile", inPKI(APIServerEtcdKey)},
		{"etcd-servers", r.etcdServers()},
		// SizeBasedListCostEstimate (beta, on since 1.34) lists the keys of each resource from the watch
		// cache about once a minute to learn its objects' average size, and whatever the poll period
		// above, its own loop does it when the poll has not: each such list is a consistent read, a
		// linearizable read of etcd's revision (a ReadIndex round with the leader and its peers) and a
		// wait for the cache to reach it. On an idle one-vCPU control plane, in two minutes, 129-139 of
		// the API server's 303-330 etcd requests against 20-24 of 191-210 with the gate off; on a busy
		// three-member cluster under emulation, lists that waited on ReadIndex rounds of seconds
		// (docs/figures.md). Off, a LIST's cost is estimated from the object count alone, as before 1.34.
		// A feature-gates in cluster.apiServer.extraArgs replaces this one.
		{"feature-gates", "SizeBasedListCostEstimate=false"},
		{"kubelet-client-certificate", inPKI(APIServerKubeletCert)},
		{"kubelet-client-key", inPKI(APIServerKubeletKey)},
		{"kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname"},
		{"proxy-client-cert-file", inPKI(FrontProxyClientCert)},
		{"proxy-client-key-file", inPKI(FrontProxyClientKey)},
		{"requestheader-allowed-names", FrontProxyClientCN},
		{"requestheader-client-ca-file", inPKI(FrontProxyCACert)},
		{"requestheader-extra-headers-prefix", "X-Remote-Extra-"},
		{"requestheader-group-headers", "X-Remote-Group"},
		{"requestheader-username-headers", "X-Remote-User"},
		{"secure-port", strconv.Itoa(APIServerPort)},
		{"service-account-issuer", "https://kubernetes.default.svc." + r.dnsDomain},
		{"service-account-key-file", inPKI(ServiceAccountPublic)},
		{"service-account-signing-key-file", inPKI(ServiceAccountKey)},
		{"service-cluster-ip-range", r.serviceCIDR.String()},
		{"tls-cert-file", inPKI(APIServerCert)},
		{"tls-private-key-file", inPKI(APIServerKey)},
	}
	extra := cl.APIServer.ExtraArgs
	if _, ok := extra["authorization-config"]; ok {
		// kube-apiserver refuses both; a structured authorization config replaces the mode.
		flags = without(flags, "authorization-mode")
	}
	vols, vms := volumes(append([]hostMount{r.pkiMount()}, r.etcHostsMount()...))
	ready := probe{host: r.primary.String(), path: "/readyz", port: APIServerPort, scheme: corev1.URISchemeHTTPS}
	// No liveness or startup probe (Talos runs its API server without one too): the kubelet would kill
	// an API server for being slow, never for being dead (a process that exits is restarted anyway), and
	// its restart is what turns a busy control plane into a down one. Measured on an emulated control
	// plane while a worker joined: /livez timed out in its TLS handshake, the kubelet killed a working API
	// server, and every client then reconnected at once, each with a new TLS handshake; the new API
	// server could not answer its own loopback client within the 30 s its RBAC start-up hook allows, so
	// it exited, again and again, for as long as the clients kept trying. Kept running, a slow API server
	// keeps its clients' connections and caches and catches up. machined's health reports it either way.
	return staticPod(corev1.Container{
		Name:           KubeAPIServer,
		Image:          r.images.APIServer,
		Command:        command(KubeAPIServer, flags, extra),
		VolumeMounts:   vms,
		Resources:      requests("250m", ""),
		ReadinessProbe: ready.readiness(),
	}, vols)
}

// ControllerManagerPod is kube-controller-manager's static pod. It allocates each node's PodCIDR (the
// CNI bridge uses it), signs kubelet CSRs with the cluster CA, and runs the bootstrap-token controllers.
func (r *Renderer) ControllerManagerPod() *corev1.Pod {
	cl := r.cfg.Cluster
	kubeconfig := containerKubernetesDir + "/" + ControllerManagerConf
	flags := []arg{
		{"allocate-node-cidrs", "true"},
		{"authentication-kubeconfig", kubeconfig},
		{"authorization-kubeconfig", kubeconfig},
		{"bind-address", r.loopback()},
		{"client-ca-file", inPKI(CACert)},
		{"cluster-cidr", r.podCIDR.String()},
		{"cluster-name", cl.Name},
		{"cluster-signing-cert-file", inPKI(CACert)},
		{"cluster-signing-key-file", inPKI(CAKey)},
		{"controllers", "*,bootstrapsigner,tokencleaner"},
		{"kubeconfig", kubeconfig},
		{"leader-elect", "true"},
		{"leader-elect-lease-duration", leaderElectLease},
		{"leader-elect-renew-deadline", leaderElectRenew},
		{"leader-elect-retry-period", leaderElectRetry},
		{"node-cidr-mask-size", strconv.Itoa(r.maskSize)},
		{"requestheader-client-ca-file", inPKI(FrontProxyCACert)},
		{"root-ca-file", inPKI(CACert)},
		{"service-account-private-key-file", inPKI(ServiceAccountKey)},
		{"service-cluster-ip-range", r.serviceCIDR.String()},
		{"tls-cert-file", inPKI(ControllerManagerServerCert)},
		{"tls-private-key-file", inPKI(ControllerManagerServerKey)},
		{"use-service-account-credentials", "true"},
	}
	vols, vms := volumes([]hostMount{r.pkiMount(), r.kubeconfigMount(ControllerManagerConf)})
	p := probe{host: r.loopback(), path: "/healthz", port: ControllerManagerPort, scheme: corev1.URISchemeHTTPS}
	return staticPod(corev1.Container{
		Name:          KubeControllerManager,
		Image:         r.images.ControllerManager,
		Command:       command(KubeControllerManager, flags, cl.ControllerManager.ExtraArgs),
		VolumeMounts:  vms,
		Resources:     requests("100m", ""), // 100m of kubeadm's 200m went to etcd (manifests_etcd.go)
		LivenessProbe: p.liveness(),
		StartupProbe:  p.quickStartup(),
	}, vols)
}

// SchedulerPod is kube-scheduler's static pod.
func (r *Renderer) SchedulerPod() *corev1.Pod {
	kubeconfig := containerKubernetesDir + "/" + SchedulerConf
	flags := []arg{
		{"authentication-kubeconfig", kubeconfig},
		{"authorization-kubeconfig", kubeconfig},
		{"bind-address", r.loopback()},
		{"kubeconfig", kubeconfig},
		{"leader-elect", "true"},
		{"leader-elect-lease-duration", leaderElectLease},
		{"leader-elect-renew-deadline", leaderElectRenew},
		{"leader-elect-retry-period", leaderElectRetry},
		{"tls-cert-file", inPKI(SchedulerServerCert)},
		{"tls-private-key-file", inPKI(SchedulerServerKey)},
	}
	// The scheduler gets its own two PKI files, not the directory (which holds the CA keys).
	vols, vms := volumes([]hostMount{r.kubeconfigMount(SchedulerConf),
		r.pkiFileMount("scheduler-cert", SchedulerServerCert), r.pkiFileMount("scheduler-key", SchedulerServerKey)})
	live := probe{host: r.loopback(), path: "/livez", port: SchedulerPort, scheme: corev1.URISchemeHTTPS}
	return staticPod(corev1.Container{
		Name:          KubeScheduler,
		Image:         r.images.Scheduler,
		Command:       command(KubeScheduler, flags, r.cfg.Cluster.Scheduler.ExtraArgs),
		VolumeMounts:  vms,
		Resources:     requests("100m", ""),
		LivenessProbe: live.liveness(),
		StartupProbe:  live.quickStartup(),
	}, vols)
}

func without(flags []arg, name string) []arg {
	out := flags[:0:0]
	for _, f := range flags {
		if f.name != name {
			out = append(out, f)
		}
	}
	return out
}

// APIServerURL is the URL of this node's kube-apiserver on its primary address.
func (r *Renderer) APIServerURL() string {
	return "https://" + net.JoinHostPort(r.primary.String(), strconv.Itoa(APIServerPort))
}
