package kube

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func TestBootstrapObjectsGolden(t *testing.T) {
	r := newTestRenderer(t)
	objs, err := r.BootstrapObjects(BootstrapOptions{Expires: testNow.Add(24 * time.Hour)})
	if err != nil {
		t.Fatalf("BootstrapObjects: %v", err)
	}
	ca := r.cfg.Cluster.Secrets.KubernetesCA.Cert
	var out bytes.Buffer
	for _, o := range objs {
		data, err := o.JSON()
		if err != nil {
			t.Fatalf("JSON: %v", err)
		}
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			t.Fatal(err)
		}
		// The cluster CA is new at every run; the rest is a function of the config.
		y = bytes.ReplaceAll(y, []byte(b64(ca)), []byte("CLUSTER-CA"))
		out.WriteString("# POST " + o.Path + "  (PUT " + o.ItemPath() + ")\n---\n")
		out.Write(y)
	}
	golden(t, "bootstrap/objects.yaml", out.Bytes())
}

func TestBootstrapObjectsContent(t *testing.T) {
	r := newTestRenderer(t)
	objs, err := r.BootstrapObjects(BootstrapOptions{})
	if err != nil {
		t.Fatalf("BootstrapObjects: %v", err)
	}
	byName := map[string]Object{}
	for _, o := range objs {
		byName[o.Name] = o
	}
	sec, ok := byName["bootstrap-token-abcdef"].Object.(*corev1.Secret)
	if !ok {
		t.Fatalf("no Secret bootstrap-token-abcdef among %v", names(objs))
	}
	if sec.Type != "bootstrap.kubernetes.io/token" || sec.Namespace != "kube-system" {
		t.Errorf("token Secret type %q namespace %q, want bootstrap.kubernetes.io/token in kube-system", sec.Type, sec.Namespace)
	}
	if _, ok := sec.StringData["expiration"]; ok {
		t.Errorf("token Secret has an expiration, want none when BootstrapOptions.Expires is zero")
	}
	if got := sec.StringData["token-secret"]; got != "0123456789abcdef" {
		t.Errorf("token-secret = %q, want the config token's secret", got)
	}

	// Who may do what: the bindings the bootstrap flow depends on.
	wantBindings := map[string][2]string{
		"cairn:kubelet-bootstrap":                     {"system:node-bootstrapper", BootstrapGroup},
		"cairn:node-autoapprove-bootstrap":            {"system:certificates.k8s.io:certificatesigningrequests:nodeclient", BootstrapGroup},
		"cairn:node-autoapprove-certificate-rotation": {"system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"},
	}
	for name, want := range wantBindings {
		b, ok := byName[name].Object.(*rbacv1.ClusterRoleBinding)
		if !ok {
			t.Errorf("no ClusterRoleBinding %s among %v", name, names(objs))
			continue
		}
		got := [2]string{b.RoleRef.Name, b.Subjects[0].Name}
		if got != want || b.Subjects[0].Kind != "Group" {
			t.Errorf("%s binds %v (kind %s), want %v to a Group", name, got, b.Subjects[0].Kind, want)
		}
	}

	ci, ok := byName["cluster-info"].Object.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("no ConfigMap cluster-info among %v", names(objs))
	}
	kc := decodeKubeconfig(t, []byte(ci.Data["kubeconfig"]))
	if kc.Clusters[0].Cluster.Server != "https://api.demo.example:6443" || len(kc.AuthInfos) != 0 {
		t.Errorf("cluster-info kubeconfig server %q with %d users, want the endpoint and no credentials", kc.Clusters[0].Cluster.Server, len(kc.AuthInfos))
	}
}

func TestBootstrapObjectsToken(t *testing.T) {
	r := newTestRenderer(t)
	for _, tt := range []struct{ token, wantErr string }{
		{"nope", "not ID.SECRET"},
		{"ABCDEF.0123456789abcdef", "not ID.SECRET"},
		{"abcdef.0123456789abcde", "not ID.SECRET"},
	} {
		if _, err := r.BootstrapObjects(BootstrapOptions{Token: tt.token}); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("BootstrapObjects(token %q) error = %v, want one mentioning %q", tt.token, err, tt.wantErr)
		}
	}
	objs, err := r.BootstrapObjects(BootstrapOptions{Token: "zyxwvu.0123456789abcdef"})
	if err != nil {
		t.Fatalf("BootstrapObjects: %v", err)
	}
	if diff := cmp.Diff("bootstrap-token-zyxwvu", objs[0].Name); diff != "" {
		t.Errorf("first object (-want +got):\n%s", diff)
	}
}

func names(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return out
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
