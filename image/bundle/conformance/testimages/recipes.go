// Package testimages builds the images Kubernetes' conformance tests run, from source and Debian's
// programs, under exactly the names e2e.test asks for: the names come from the suite's own image
// manifest (k8s.io/kubernetes/test/utils/image) at the pinned version, never from a list kept here, so a
// node that imported them has every image a [Conformance] test pulls and nothing is fetched.
//
// Every image of the manifest is either built by a recipe below or listed in NotNeeded with the reason;
// the unit test fails on an image that is neither, which is how a Kubernetes upgrade that adds one is
// noticed.
package testimages

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/cairn-os/cairn/image/bundle/internal/images"
	imageutils "k8s.io/kubernetes/test/utils/image"
)

// Inputs are the files the recipes pack. Binaries are built by `conformance build` from the pinned
// Kubernetes module (agnhost, nonewprivs, sample-apiserver) or taken from the node's bundle (etcd); the
// host programs come from Debian packages (hack/deps.sh conformance).
type Inputs struct {
	Agnhost         []byte // k8s.io/kubernetes/test/images/agnhost
	Nonewprivs      []byte // k8s.io/kubernetes/test/images/nonewprivs
	SampleAPIServer []byte // k8s.io/sample-apiserver
	Etcd            []byte // the bundle's etcd, the one the node runs
	EtcdVersion     string // its version, for the layer's comment

	Busybox        []byte   // Debian's busybox-static
	BusyboxApplets []string // `busybox --list-full`: usr/bin/wget, bin/sh, ...
	// Tools is a tree staged by image/cmd/hosttools with dig, getent, curl and nginx and their
	// libraries, every program under /usr/sbin.
	Tools []images.File // bash, nc.openbsd, dig, getent, curl, nginx
	// Sources reads files of the Kubernetes module's test/images directory (the porter's TLS pair, the
	// kitten and nautilus pages), e.g. "agnhost/porter/localhost.crt".
	Sources func(name string) ([]byte, error)
}

// NotNeeded are the manifest's images no [Conformance] test runs, with the reason; they are not built.
// The CSI drivers' images (added to the manifest from the storage tests' YAML) are not needed either:
// those tests are not conformance tests.
var NotNeeded = map[imageutils.ImageID]string{
	imageutils.AgnhostPrivate:          "stands for a private registry's image: the tests expect its pull to fail",
	imageutils.InvalidRegistryImage:    "names an invalid registry: the tests expect its pull to fail",
	imageutils.AppArmorLoader:          "AppArmor tests only (Feature:AppArmor)",
	imageutils.DistrolessIptables:      "kube-proxy tests that are not conformance tests",
	imageutils.IpcUtils:                "IPC namespace tests that are not conformance tests",
	imageutils.NFSProvisioner:          "storage tests (NFS), not conformance tests",
	imageutils.NodePerfNpbEp:           "node performance tests",
	imageutils.NodePerfNpbIs:           "node performance tests",
	imageutils.NodePerfPytorchWideDeep: "node performance tests",
	imageutils.Perl:                    "no conformance test runs it",
	imageutils.RegressionIssue74839:    "a conntrack regression test that is not a conformance test",
	imageutils.ResourceConsumer:        "autoscaling tests, not conformance tests",
	imageutils.VolumeNFSServer:         "storage tests (NFS), not conformance tests",
	imageutils.VolumeISCSIServer:       "storage tests (iSCSI), not conformance tests",
	imageutils.SampleDevicePlugin:      "device plugin tests, not conformance tests",
}

// ProvidedByNode are images every Cairn node already has under the manifest's name.
var ProvidedByNode = map[imageutils.ImageID]string{
	imageutils.Pause: "the node's own pod sandbox image (the bundle's pause), under the same name",
}

// recipe returns what goes into one image besides its name.
type recipe func(in Inputs) (spec, error)

type spec struct {
	layers     [][]images.File
	comments   []string
	entrypoint []string
	cmd        []string
	user       string
	ports      []string
}

var recipes = map[imageutils.ImageID]recipe{
	imageutils.Agnhost:         agnhost,
	imageutils.AgnhostPrev:     agnhost, // the tests only need an agnhost under the older tag
	imageutils.BusyBox:         busybox,
	imageutils.GlibcDnsTesting: glibcDNS,
	imageutils.Nginx:           nginx,
	imageutils.NginxNew:        nginx,
	imageutils.Kitten:          webPage("kitten"),
	imageutils.Nautilus:        webPage("nautilus"),
	imageutils.NonRoot:         nonroot,
	imageutils.Nonewprivs:      nonewprivs,
	imageutils.APIServer:       sampleAPIServer,
	imageutils.Etcd:            etcd,
}

// Image is one image to build, by its manifest ID and the name e2e.test asks for.
type Image struct {
	ID   imageutils.ImageID
	Name string
}

// Wanted lists the images to build, sorted by name, from the suite's manifest.
func Wanted() []Image {
	var out []Image
	for id, cfg := range imageutils.GetOriginalImageConfigs() {
		if _, ok := recipes[id]; ok {
			out = append(out, Image{ID: id, Name: cfg.GetE2EImage()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Uncovered returns the manifest's images that have no recipe and no reason to be left out, by name.
// CSI images are those the manifest numbers after its last named image.
func Uncovered() []string {
	var out []string
	for id, cfg := range imageutils.GetOriginalImageConfigs() {
		_, built := recipes[id]
		_, skipped := NotNeeded[id]
		_, node := ProvidedByNode[id]
		if !built && !skipped && !node && id <= imageutils.SampleDevicePlugin {
			out = append(out, cfg.GetE2EImage())
		}
	}
	sort.Strings(out)
	return out
}

// Build assembles every wanted image.
func Build(in Inputs) ([]images.Named, error) {
	var out []images.Named
	for _, w := range Wanted() {
		s, err := recipes[w.ID](in)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", w.Name, err)
		}
		spec := images.Spec{Name: w.Name, Entrypoint: s.entrypoint, Cmd: s.cmd, User: s.user, ExposedPorts: s.ports,
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}
		for i, files := range s.layers {
			l, err := images.Layer(files)
			if err != nil {
				return nil, fmt.Errorf("image %s: %w", w.Name, err)
			}
			spec.Layers = append(spec.Layers, images.LayerSpec{Layer: l, Comment: s.comments[i]})
		}
		n, err := images.Build(spec)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func (s *spec) add(comment string, files []images.File) {
	s.layers = append(s.layers, files)
	s.comments = append(s.comments, comment)
}

// base is what every image but sample-apiserver's and etcd's has: the busybox userland (wget, nc,
// nslookup ... that the tests exec into their containers), the account files, and the Debian programs'
// layer (bash as sh, netcat-openbsd as nc, dig, getent, curl, nginx), one layer shared by every image.
func base(in Inputs) (spec, error) {
	if len(in.Busybox) == 0 || len(in.BusyboxApplets) == 0 {
		return spec{}, fmt.Errorf("no busybox binary or applet list (install busybox-static: hack/deps.sh conformance)")
	}
	// Debian's merged /usr, as in the host tools' tree layered on top: a directory /bin here would be
	// replaced by that tree's /bin link, and everything in it lost.
	files := []images.File{
		{Path: "usr/bin/busybox", Mode: 0o755, Data: in.Busybox},
		{Path: "bin", Mode: fs.ModeSymlink | 0o777, Linkname: "usr/bin"},
		{Path: "sbin", Mode: fs.ModeSymlink | 0o777, Linkname: "usr/sbin"},
		{Path: "lib", Mode: fs.ModeSymlink | 0o777, Linkname: "usr/lib"},
		{Path: "lib64", Mode: fs.ModeSymlink | 0o777, Linkname: "usr/lib64"},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\n" +
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nuser-defined-in-image:x:1000:\n" +
			"group-defined-in-image:x:50000:user-defined-in-image\nnogroup:x:65534:\n")},
		{Path: "etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\npasswd: files\ngroup: files\n")},
		{Path: "tmp", Mode: images.Dir | fs.ModeSticky | 0o777},
		{Path: "root", Mode: images.Dir | 0o700},
	}
	// Every applet is in /bin as in the busybox image upstream's tests are written against (they run
	// /bin/sysctl), and the system ones in /sbin too, where Debian's list puts them.
	seen := map[string]bool{"usr/bin/busybox": true}
	for _, a := range in.BusyboxApplets {
		a = strings.TrimPrefix(a, "/")
		if a == "" {
			continue
		}
		paths := []string{"usr/bin/" + path.Base(a)}
		if strings.HasPrefix(a, "sbin/") || strings.HasPrefix(a, "usr/sbin/") {
			paths = append(paths, "usr/sbin/"+path.Base(a))
		}
		for _, p := range paths {
			if !seen[p] {
				seen[p] = true
				files = append(files, images.File{Path: p, Mode: fs.ModeSymlink | 0o777, Linkname: "/usr/bin/busybox"})
			}
		}
	}
	for i := range files {
		if target, ok := replacedApplets[files[i].Path]; ok {
			files[i].Linkname = target
		}
	}
	t, err := tools(in, "bash", "nc.openbsd")
	if err != nil {
		return spec{}, err
	}
	var s spec
	s.add("busybox (Debian's busybox-static) and account files; sh is bash", files)
	s.add(toolsComment, t)
	return s, nil
}

// replacedApplets are busybox applets that Debian 12's busybox (1.35) lacks features of that the tests
// use, replaced by Debian's programs from the tools layer:
//   - sh: busybox ash drops environment variables whose names are not shell identifiers, which Kubernetes
//     allows (envFrom a Secret with the key data-1) and the tests print with `sh -c env`; busybox 1.37's
//     ash, in upstream's image, passes them on, as bash does;
//   - nc: Debian's busybox nc has no -v, -t, -u or -z; the tests' `nc -v -t -w 2 HOST PORT` and `nc -u`
//     want netcat-openbsd, as in upstream's agnhost image.
var replacedApplets = map[string]string{
	"usr/bin/sh": "/usr/sbin/bash",
	"usr/bin/nc": "/usr/sbin/nc.openbsd",
}

// tools returns the staged host programs' tree after checking that the programs an image runs are in
// it. Every image that carries host programs gets the same whole tree, one layer with one digest, which
// the node stores once.
func tools(in Inputs, programs ...string) ([]images.File, error) {
	have := map[string]bool{}
	for _, f := range in.Tools {
		have[f.Path] = true
	}
	for _, p := range programs {
		if !have["usr/sbin/"+p] {
			return nil, fmt.Errorf("the staged host tools lack %s (hack/deps.sh conformance installs it)", p)
		}
	}
	return in.Tools, nil
}

const toolsComment = "bash, netcat-openbsd, dig, getent, curl and nginx with their libraries, from Debian"

func need(what string, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("no %s binary", what)
	}
	return nil
}

// agnhost is the suite's Swiss-army test program, with the userland its tests exec (busybox, dig and
// curl), the porter's TLS pair and the users its image defines, as upstream's image has them.
func agnhost(in Inputs) (spec, error) {
	if err := need("agnhost", in.Agnhost); err != nil {
		return spec{}, err
	}
	s, err := base(in)
	if err != nil {
		return spec{}, err
	}
	if _, err := tools(in, "dig", "curl"); err != nil {
		return spec{}, err
	}
	crt, err := in.Sources("agnhost/porter/localhost.crt")
	if err != nil {
		return spec{}, err
	}
	key, err := in.Sources("agnhost/porter/localhost.key")
	if err != nil {
		return spec{}, err
	}
	s.add("agnhost, built from the pinned Kubernetes module", []images.File{
		{Path: "agnhost", Mode: 0o755, Data: in.Agnhost},
		{Path: "agnhost-2", Mode: fs.ModeSymlink | 0o777, Linkname: "agnhost"},
		{Path: "localhost.crt", Mode: 0o644, Data: crt},
		{Path: "localhost.key", Mode: 0o600, Data: key},
		{Path: "uploads", Mode: images.Dir | 0o755},
	})
	s.entrypoint, s.cmd = []string{"/agnhost"}, []string{"pause"}
	s.ports = []string{"80/tcp", "8080/tcp", "8081/tcp", "9376/tcp", "5000/tcp"}
	return s, nil
}

func busybox(in Inputs) (spec, error) {
	s, err := base(in)
	s.cmd = []string{"sh"}
	return s, err
}

// glibcDNS resolves through glibc (dig and getent), where agnhost's tools would do it their own way.
func glibcDNS(in Inputs) (spec, error) {
	s, err := base(in)
	if err != nil {
		return spec{}, err
	}
	if _, err := tools(in, "dig", "getent"); err != nil {
		return spec{}, err
	}
	return s, nil
}

const nginxConf = `user nobody nogroup;
worker_processes 1;
error_log /dev/stderr;
pid /run/nginx.pid;
events { worker_connections 256; }
http {
	access_log /dev/stdout;
	client_body_temp_path /tmp/nginx-body;
	proxy_temp_path /tmp/nginx-proxy;
	fastcgi_temp_path /tmp/nginx-fastcgi;
	uwsgi_temp_path /tmp/nginx-uwsgi;
	scgi_temp_path /tmp/nginx-scgi;
	server {
		listen 80;
		location / { root /usr/share/nginx/html; index index.html; }
	}
}
`

// nginx is Debian's nginx serving a page on port 80 in the foreground, as the tests expect.
func nginx(in Inputs) (spec, error) {
	s, err := base(in)
	if err != nil {
		return spec{}, err
	}
	if _, err := tools(in, "nginx"); err != nil {
		return spec{}, err
	}
	s.add("nginx's configuration and page", []images.File{
		{Path: "etc/nginx/nginx.conf", Mode: 0o644, Data: []byte(nginxConf)},
		{Path: "usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte("<html><body>Welcome to nginx!</body></html>\n")},
		{Path: "var/lib/nginx", Mode: images.Dir | 0o755},
		{Path: "var/log/nginx", Mode: images.Dir | 0o755},
		{Path: "run", Mode: images.Dir | 0o755},
	})
	s.entrypoint = []string{"/usr/sbin/nginx", "-g", "daemon off;"}
	s.ports = []string{"80/tcp"}
	return s, nil
}

// webPage is agnhost's test-webserver serving a picture and its data.json (the Update Demo tests and
// image volumes read them).
func webPage(name string) recipe {
	return func(in Inputs) (spec, error) {
		s, err := agnhost(in)
		if err != nil {
			return spec{}, err
		}
		jpg, err := in.Sources(name + "/html/" + name + ".jpg")
		if err != nil {
			return spec{}, err
		}
		data, err := in.Sources(name + "/html/data.json")
		if err != nil {
			return spec{}, err
		}
		s.add(name+"'s page", []images.File{
			{Path: name + ".jpg", Mode: 0o644, Data: jpg},
			{Path: "data.json", Mode: 0o644, Data: data},
		})
		s.cmd = []string{"test-webserver"}
		return s, nil
	}
}

// nonroot is the base userland whose default user is 1234.
func nonroot(in Inputs) (spec, error) {
	s, err := base(in)
	s.user = "1234"
	return s, err
}

// nonewprivs runs a set-user-ID program that reports whether it gained privileges.
func nonewprivs(in Inputs) (spec, error) {
	if err := need("nonewprivs", in.Nonewprivs); err != nil {
		return spec{}, err
	}
	s, err := base(in)
	if err != nil {
		return spec{}, err
	}
	s.add("nnp, built from the pinned Kubernetes module, set-user-ID root", []images.File{
		{Path: "usr/local/bin/nnp", Mode: fs.ModeSetuid | 0o755, Data: in.Nonewprivs},
	})
	s.cmd = []string{"nnp"}
	return s, nil
}

func sampleAPIServer(in Inputs) (spec, error) {
	return oneBinary("sample-apiserver", in.SampleAPIServer, "kube-sample-apiserver",
		"kube-sample-apiserver, built from k8s.io/sample-apiserver at the pinned version")
}

// etcd is the node's own etcd binary at the path the aggregator test runs it from.
func etcd(in Inputs) (spec, error) {
	return oneBinary("etcd", in.Etcd, "usr/local/bin/etcd", "etcd "+in.EtcdVersion+", the node's")
}

// oneBinary is an image of one static program at path (its entrypoint) and a /tmp.
func oneBinary(what string, data []byte, path, comment string) (spec, error) {
	if err := need(what, data); err != nil {
		return spec{}, err
	}
	var s spec
	s.add(comment, []images.File{
		{Path: path, Mode: 0o755, Data: data},
		{Path: "tmp", Mode: images.Dir | fs.ModeSticky | 0o777},
	})
	s.entrypoint = []string{"/" + path}
	return s, nil
}
