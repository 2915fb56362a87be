package addons

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-os/cairn/api/config"
	"github.com/cairn-os/cairn/machined/internal/kube"
	"github.com/cairn-os/cairn/machined/internal/paths"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// testOptions enable every add-on with a value in every field rendering reads.
func testOptions() Options {
	return Options{
		APIServer:    "https://api.demo.example:6443",
		PodCIDR:      netip.MustParsePrefix("10.244.0.0/16"),
		ServiceCIDR:  netip.MustParsePrefix("10.96.0.0/12"),
		DNSDomain:    "cluster.local",
		DNSServiceIP: netip.MustParseAddr("10.96.0.10"),
		Images: Images{
			KubeProxy: "registry.k8s.io/kube-proxy:v1.37.2",
			CoreDNS:   "registry.k8s.io/coredns/coredns:v1.15.0",
			Flannel:   "cairn.local/flannel:v0.28.10",
		},
		CNI:             config.CNIFlannel,
		HostPaths:       DefaultHostPaths(paths.Paths{Root: "/"}),
		CoreDNSReplicas: 2, // a cluster of several nodes
	}
}

func mustRender(t *testing.T, o Options) []kube.Object {
	t.Helper()
	objs, err := Render(o)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return objs
}

// encode is the objects as YAML documents, each headed by where the apply goes.
func encode(t *testing.T, objs []kube.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatalf("encode %s: %v", o.ItemPath(), err)
		}
		b.WriteString("# " + o.ItemPath() + "\n")
		b.Write(data)
	}
	return b.Bytes()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-want +got):\n%s", name, cmp.Diff(string(want), string(got)))
	}
}

// find returns the object of that kind and name, failing the test if there is none.
func find[T any](t *testing.T, objs []kube.Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.Object.(T); ok && o.Name == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T named %q among the rendered objects", zero, name)
	return zero
}

// has tells whether an object of that kind and name was rendered.
func has(objs []kube.Object, kind, name string) bool {
	for _, o := range objs {
		if o.Object.GetObjectKind().GroupVersionKind().Kind == kind && o.Name == name {
			return true
		}
	}
	return false
}

func configData(t *testing.T, objs []kube.Object, name, key string) string {
	t.Helper()
	cm := find[*corev1.ConfigMap](t, objs, name)
	v, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no %s", name, key)
	}
	return v
}

func onlyContainer(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	return spec.Containers[0]
}

func daemonSetContainer(t *testing.T, objs []kube.Object, name string) corev1.Container {
	t.Helper()
	return onlyContainer(t, daemonSet(t, objs, name).Spec.Template.Spec)
}

func daemonSet(t *testing.T, objs []kube.Object, name string) *appsv1.DaemonSet {
	t.Helper()
	return find[*appsv1.DaemonSet](t, objs, name)
}

func deployment(t *testing.T, objs []kube.Object) *appsv1.Deployment {
	t.Helper()
	return find[*appsv1.Deployment](t, objs, CoreDNSDeployment)
}
