package images

import (
	"fmt"
	"io/fs"

	"github.com/cairn-os/cairn/image/bundle/internal/versions"
)

// Binaries are the programs the images carry, by name (kube, etcd, pause,
// cairn-mount).
type Binaries map[string][]byte

// BinaryNames are the entries Binaries must hold: files of the bundle's bin/.
var BinaryNames = []string{"kube", "etcd", "pause", "cairn-mount"}

// KubeComponents are the names the multi-call kube binary answers to; each
// gets a symlink in the shared layer.
var KubeComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "coredns", "flanneld"}

const binDir = "usr/local/bin"

var defaultEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// baseFiles are the few files a static binary may look for: user names for
// logs and `id`, and nsswitch.conf so Go's resolver reads /etc/hosts first
// (machined keeps the API endpoint and etcd names there).
func baseFiles() []File {
	return []File{
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\nnobody:x:65534:\n")},
		{Path: "etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Path: "tmp", Mode: Dir | fs.ModeSticky | 0o777},
		{Path: "root", Mode: Dir | 0o700},
		{Path: "home/nonroot", Mode: Dir | 0o755},
	}
}

// Bundle returns every image of the bundle, named exactly as Kubernetes and
// containerd ask for them so no configuration needs an override. The
// Kubernetes images, the kubelet image, the CoreDNS image and the flannel
// image share the base layer and the layer holding the multi-call binary, so
// containerd stores it once.
// netfilter is the staged tree of nft and iptables with their libraries
// (image/cmd/hosttools, read with DirFiles): one layer that the kube-proxy
// and flannel images share.
func Bundle(v versions.Versions, bins Binaries, netfilter []File) ([]Named, error) {
	for _, name := range BinaryNames {
		if len(bins[name]) == 0 {
			return nil, fmt.Errorf("binary %s missing or empty", name)
		}
	}
	if len(netfilter) == 0 {
		return nil, fmt.Errorf("netfilter tools missing")
	}
	base, err := Layer(baseFiles())
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	kubeFiles := []File{{Path: binDir + "/kube", Mode: 0o755, Data: bins["kube"]}}
	for _, c := range KubeComponents {
		kubeFiles = append(kubeFiles, File{Path: binDir + "/" + c, Mode: fs.ModeSymlink, Linkname: "kube"})
	}
	kube, err := Layer(kubeFiles)
	if err != nil {
		return nil, fmt.Errorf("kube layer: %w", err)
	}
	// kubelet runs `mount` and `umount` for tmpfs and bind volumes.
	mountTools, err := Layer([]File{
		{Path: binDir + "/cairn-mount", Mode: 0o755, Data: bins["cairn-mount"]},
		{Path: "usr/bin/mount", Mode: fs.ModeSymlink, Linkname: "/" + binDir + "/cairn-mount"},
		{Path: "usr/bin/umount", Mode: fs.ModeSymlink, Linkname: "/" + binDir + "/cairn-mount"},
	})
	if err != nil {
		return nil, fmt.Errorf("mount tools layer: %w", err)
	}
	// The kube-proxy image's directory with only nft in it, which kube-proxy
	// puts first on its PATH, in place of those holding iptables, when Cairn's
	// DaemonSet asks for nftables mode and the node has no iptables-mode rules
	// (image/bundle/kube/proxyenv.NFTOnlyDir).
	nftOnly, err := Layer([]File{
		{Path: "usr/libexec/cairn-kube-proxy/nft", Mode: fs.ModeSymlink, Linkname: "/usr/sbin/nft"},
	})
	if err != nil {
		return nil, fmt.Errorf("kube-proxy nft-only layer: %w", err)
	}
	etcd, err := Layer([]File{
		{Path: binDir + "/etcd", Mode: 0o755, Data: bins["etcd"]},
		{Path: binDir + "/etcdutl", Mode: fs.ModeSymlink, Linkname: "etcd"},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd layer: %w", err)
	}
	// Like upstream's pause image: the binary alone, at /pause.
	pause, err := Layer([]File{{Path: "pause", Mode: 0o755, Data: bins["pause"]}})
	if err != nil {
		return nil, fmt.Errorf("pause layer: %w", err)
	}
	// Upstream's CoreDNS image runs /coredns: here a link into the kube layer.
	coredns, err := Layer([]File{{Path: "coredns", Mode: fs.ModeSymlink, Linkname: binDir + "/coredns"}})
	if err != nil {
		return nil, fmt.Errorf("coredns layer: %w", err)
	}
	// Where upstream's flannel image has it (its DaemonSet runs
	// /opt/bin/flanneld): a link into the kube layer.
	flannel, err := Layer([]File{{Path: "opt/bin/flanneld", Mode: fs.ModeSymlink, Linkname: "/" + binDir + "/flanneld"}})
	if err != nil {
		return nil, fmt.Errorf("flannel layer: %w", err)
	}
	nf, err := Layer(netfilter)
	if err != nil {
		return nil, fmt.Errorf("netfilter layer: %w", err)
	}

	baseL := LayerSpec{base, "base files"}
	kubeL := LayerSpec{kube, "kube multi-call binary " + v.Kubernetes}
	nfL := LayerSpec{nf, "nft and iptables (nf_tables) with their libraries, from the build host's Debian"}
	component := func(name string, extra ...LayerSpec) Spec {
		return Spec{
			Name:       "registry.k8s.io/" + name + ":" + v.Kubernetes,
			Layers:     append([]LayerSpec{baseL, kubeL}, extra...),
			Entrypoint: []string{"/" + binDir + "/" + name},
			Env:        defaultEnv,
		}
	}
	specs := []Spec{
		component("kube-apiserver"),
		component("kube-controller-manager"),
		component("kube-scheduler"),
		// kube-proxy runs nft and iptables, found through PATH (/usr/sbin).
		component("kube-proxy", nfL, LayerSpec{nftOnly, "a directory with only nft in it, for kube-proxy's PATH"}),
		{
			Name:       "cairn.local/kubelet:" + v.Kubernetes,
			Layers:     []LayerSpec{baseL, kubeL, {mountTools, "mount and umount for kubelet"}},
			Entrypoint: []string{"/" + binDir + "/kubelet"},
			Env:        defaultEnv,
		},
		{
			Name:       "registry.k8s.io/etcd:" + v.EtcdImageTag(),
			Layers:     []LayerSpec{baseL, {etcd, "etcd " + v.Etcd}},
			Entrypoint: []string{"/" + binDir + "/etcd"},
			Env:        defaultEnv,
		},
		{
			// The name kubeadm gives CoreDNS; user and ports as upstream's
			// image. Unlike upstream's /coredns, the shared binary carries no
			// file capability (it would apply to every component): port 53
			// is allowed by the pod's net.ipv4.ip_unprivileged_port_start.
			Name:         "registry.k8s.io/coredns/coredns:" + v.CoreDNS,
			Layers:       []LayerSpec{baseL, kubeL, {coredns, "/coredns, CoreDNS " + v.CoreDNS + " in the kube binary"}},
			Entrypoint:   []string{"/coredns"},
			Env:          defaultEnv,
			User:         "65532:65532",
			ExposedPorts: []string{"53/tcp", "53/udp"},
		},
		{
			// Not flannel's own image name: this image is built here and,
			// unlike upstream's, carries no flannel CNI plugin.
			Name:       "cairn.local/flannel:" + v.Flannel,
			Layers:     []LayerSpec{baseL, kubeL, nfL, {flannel, "/opt/bin/flanneld, flanneld " + v.Flannel + " in the kube binary"}},
			Entrypoint: []string{"/opt/bin/flanneld"},
			Env:        defaultEnv,
		},
		{
			Name:       "registry.k8s.io/pause:" + v.PauseTag,
			Layers:     []LayerSpec{{pause, "pause"}},
			Entrypoint: []string{"/pause"},
			User:       "65535:65535",
		},
	}
	out := make([]Named, 0, len(specs))
	for _, s := range specs {
		n, err := Build(s)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
