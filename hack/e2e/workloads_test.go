//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cairn-os/cairn/hack/examples/helloimage"
)

// importHello is the first thing a user does with an app on a new cluster (issue 12): import its image,
// which the nodes do not carry (the payload has no test workload), into the nodes of c with these indexes
// (every node when none is given) at once, through their machine APIs. The tests' own pods run it too.
func importHello(t *testing.T, c *cluster, nodes ...int) {
	t.Helper()
	if len(nodes) == 0 {
		for i := range c.Nodes {
			nodes = append(nodes, i)
		}
	}
	archive := imageArchive(t, "./hack/examples/hello", helloimage.Ref)
	var endpoints []string
	for _, i := range nodes {
		endpoints = append(endpoints, c.Nodes[i].APIEndpoint)
	}
	out := mustCtl(t, 10*time.Minute, "--cairnconfig", c.cairnconfig, "--nodes", strings.Join(endpoints, ","), "image", "import", archive)
	t.Logf("image import:\n%s", out)
	for _, i := range nodes {
		if out := mustCtl(t, time.Minute, append(c.mtls(i), "image", "list")...); !strings.Contains(out, helloimage.Ref) {
			t.Fatalf("node %s: image list lacks %s after the import:\n%s", c.Nodes[i].Name, helloimage.Ref, out)
		}
	}
}

// checkWorkloads is what a user does next (issue 12), on one node or on a control plane and a worker,
// with the image importHello brought in: run two replicas of it (on different nodes when there are two)
// behind a ClusterIP and a NodePort Service, and reach them from a pod on each node by the Service's DNS
// name, by pod IP (across nodes when there are two), and through the NodePort on every node's address;
// kubernetes.default resolves. Only cairnctl and kubectl touch the cluster.
func checkWorkloads(t *testing.T, c *cluster, kc string) {
	const ns = "workloads"
	var nodes []string
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name)
	}

	kubectl(t, kc, "create", "namespace", ns)
	manifest := filepath.Join(t.TempDir(), "hello.json")
	writeJSONList(t, manifest, helloObjects(ns, len(nodes) > 1))
	kubectl(t, kc, "apply", "-f", manifest)
	rolloutStatus(t, kc, ns, "deployment/hello", 8*time.Minute)

	// Where the two replicas landed, and the nodes' addresses.
	var pods corev1.PodList
	kubectlJSON(t, kc, &pods, "-n", ns, "get", "pods", "-l", "app=hello")
	backend := map[string]corev1.Pod{} // node → its replica
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			backend[p.Spec.NodeName] = p
		}
	}
	for _, n := range nodes {
		if _, ok := backend[n]; !ok {
			t.Fatalf("no hello replica runs on %s; replicas: %v", n, podPlaces(pods.Items))
		}
	}
	var nl corev1.NodeList
	kubectlJSON(t, kc, &nl, "get", "nodes")
	nodeIP := map[string]string{}
	for _, n := range nl.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				nodeIP[n.Name] = a.Address
			}
		}
	}
	var np corev1.Service
	kubectlJSON(t, kc, &np, "-n", ns, "get", "service", "hello-np")
	nodePort := np.Spec.Ports[0].NodePort

	for i, n := range nodes {
		other := nodes[(i+1)%len(nodes)] // the other node's replica; on one node, the node's own
		args := []string{"probe", "--count", "20",
			"--lookup", "kubernetes.default",
			"--get", "http://hello." + ns + ".svc.cluster.local",
			"--get", "http://" + backend[other].Status.PodIP + ":8080",
		}
		for _, m := range nodes {
			args = append(args, "--get", fmt.Sprintf("http://%s:%d", nodeIP[m], nodePort))
		}
		client := fmt.Sprintf("client-%d", i)
		writeJSONList(t, manifest, []any{clientPod(ns, client, n, args)})
		kubectl(t, kc, "apply", "-f", manifest)
		waitKubectl(t, kc, 6*time.Minute, func(out string) bool { return out == "Succeeded" || out == "Failed" },
			"-n", ns, "get", "pod", client, "-o", "jsonpath={.status.phase}")
		logs := kubectl(t, kc, "-n", ns, "logs", client)
		phase := kubectl(t, kc, "-n", ns, "get", "pod", client, "-o", "jsonpath={.status.phase}")
		if phase != "Succeeded" {
			t.Errorf("client on %s ended %s: some probe failed:\n%s", n, phase, logs)
		}
		if !strings.Contains(logs, "lookup kubernetes.default: 10.96.0.1") {
			t.Errorf("client on %s: kubernetes.default did not resolve to 10.96.0.1:\n%s", n, logs)
		}
		svc := "get http://hello." + ns + ".svc.cluster.local: "
		for _, m := range nodes {
			if want := svc + "hello from " + backend[m].Name + " on " + m; !strings.Contains(logs, want) {
				t.Errorf("client on %s never reached the replica on %s through the Service by name (want %q):\n%s", n, m, want, logs)
			}
		}
		if want := "hello from " + backend[other].Name; !strings.Contains(logs, "get http://"+backend[other].Status.PodIP+":8080: "+want) {
			t.Errorf("client on %s: the pod on %s did not answer at its pod IP:\n%s", n, other, logs)
		}
		for _, m := range nodes {
			if !strings.Contains(logs, fmt.Sprintf("get http://%s:%d: hello from", nodeIP[m], nodePort)) {
				t.Errorf("client on %s: the NodePort did not answer on %s's address %s:\n%s", n, m, nodeIP[m], logs)
			}
		}
	}
	kubectl(t, kc, "delete", "namespace", ns, "--wait=false")
}

// imageArchive builds the command pkg of this repository and packs it as an image archive named ref (its
// entrypoint /hello), for `cairnctl image import`.
func imageArchive(t *testing.T, pkg, ref string) string {
	t.Helper()
	bin, err := helloimage.BuildPackage(repoRoot, pkg)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), filepath.Base(pkg)+".tar")
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := helloimage.Write(f, bin, ref); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return archive
}

// helloObjects are two replicas of hello (that must land on different nodes if spread), a ClusterIP
// Service and a NodePort Service in front of them.
func helloObjects(ns string, spread bool) []any {
	labels := map[string]string{"app": "hello"}
	env := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	replicas := int32(2)
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "hello", Image: helloimage.Ref, ImagePullPolicy: corev1.PullNever,
						Env:   []corev1.EnvVar{env("POD_NAME", "metadata.name"), env("NODE_NAME", "spec.nodeName"), env("POD_IP", "status.podIP")},
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						// An app that asks for some CPU, as a real one does: a BestEffort pod gets a CPU weight
						// of 1, and an emulated control plane's CPUs are busy even when idle, so there it
						// answered its 1 s readiness probe late and the rollout never finished.
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)},
						}, PeriodSeconds: 2},
					}},
				},
			},
		},
	}
	if spread {
		dep.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname",
			}},
		}}
	}
	svc := func(name string, typ corev1.ServiceType) *corev1.Service {
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Type: typ, Selector: labels,
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
	}
	return []any{dep, svc("hello", corev1.ServiceTypeClusterIP), svc("hello-np", corev1.ServiceTypeNodePort)}
}

// clientPod runs hello's probe once on one node.
func clientPod(ns, name, node string, args []string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "probe", Image: helloimage.Ref, ImagePullPolicy: corev1.PullNever, Args: args}},
		},
	}
}

// writeJSONList writes objects as a v1 List, which kubectl apply -f takes.
func writeJSONList(t *testing.T, path string, objs []any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// kubectlJSON runs kubectl ... -o json and decodes the answer.
func kubectlJSON(t *testing.T, kc string, v any, args ...string) {
	t.Helper()
	// stdout alone: a warning on stderr must not spoil the JSON.
	cmd := exec.Command(kubectlBin, append([]string{"--kubeconfig", kc, "--request-timeout=30s"}, append(args, "-o", "json")...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s -o json: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("kubectl %s -o json: %v", strings.Join(args, " "), err)
	}
}

func podPlaces(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+p.Spec.NodeName+"/"+string(p.Status.Phase))
	}
	slices.Sort(out)
	return out
}

// rolloutStatus waits for a rollout; when it does not finish, the pods, their descriptions and the
// namespace's events are logged before the test fails, so a failure says which replica and why.
func rolloutStatus(t *testing.T, kc, ns, what string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectlBin, "--kubeconfig", kc, "-n", ns, "rollout", "status", what,
		"--timeout="+timeout.String()).CombinedOutput()
	t.Logf("kubectl rollout status %s: %v\n%s", what, err, out)
	if err == nil {
		return
	}
	for _, args := range [][]string{{"get", "pods", "-o", "wide"}, {"describe", "pods"}, {"get", "events", "--sort-by=.lastTimestamp"}} {
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", kc, "--request-timeout=30s", "-n", ns}, args...)...).CombinedOutput()
		t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Fatalf("%s did not roll out within %v", what, timeout)
}

// logClusterState logs what says why a cluster is not healthy: every pod, the recent events, and the
// control-plane controllers' logs (the DaemonSet, Deployment and endpoint statuses are theirs to write).
func logClusterState(t *testing.T, kc string, controlPlane []string) {
	t.Helper()
	for _, args := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "events", "-A", "--sort-by=.lastTimestamp"}} {
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", kc, "--request-timeout=30s"}, args...)...).CombinedOutput()
		t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, svc := range []string{"kube-controller-manager", "kube-scheduler"} {
		r := ctlQuiet(30*time.Second, append(controlPlane, "logs", svc)...)
		out := r.stdout
		if len(out) > 6000 {
			out = out[len(out)-6000:]
		}
		t.Logf("cairnctl logs %s (end): %v\n%s", svc, r.err, out)
	}
}
