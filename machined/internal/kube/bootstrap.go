package kube

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// BootstrapGroup is the extra group of Cairn's bootstrap tokens; the RBAC below lets it, and only it,
// ask for node client certificates and have them approved.
const BootstrapGroup = "system:bootstrappers:cairn:default-node-token"

// Built-in cluster roles (created by kube-apiserver's RBAC bootstrap policy).
const (
	nodeBootstrapperRole = "system:node-bootstrapper"
	nodeClientRole       = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
	selfNodeClientRole   = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
)

var tokenFormat = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

// Object is one API object to create, with the collection path to POST it to (and ItemPath to PUT it
// to when it already exists).
type Object struct {
	Path   string
	Name   string
	Object runtime.Object
}

// ItemPath is the object's own path.
func (o Object) ItemPath() string { return o.Path + "/" + o.Name }

// JSON is the request body.
func (o Object) JSON() ([]byte, error) {
	data, err := json.Marshal(o.Object)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", o.ItemPath(), err)
	}
	return data, nil
}

// NodeDrainerRole lets nodes cordon and drain themselves on Reset.
const NodeDrainerRole = "cairn:node-drainer"

// BootstrapOptions describe the bootstrap token to publish.
type BootstrapOptions struct {
	// Token is ID.SECRET; empty uses cluster.secrets.bootstrapToken.
	Token string
	// Expires, when set, lets the token cleaner delete the token then. Zero: the token lives until
	// someone deletes it (the config's token is the cluster's join credential).
	Expires time.Time
}

// BootstrapObjects are what kubeadm creates so that nodes can join with a bootstrap token: the token
// Secret, the bindings that let its holders create node CSRs and have them auto-approved (and let
// nodes renew their own certificates), and the cluster-info ConfigMap in kube-public that the
// bootstrap signer signs with the token, with read access for anonymous clients.
func (r *Renderer) BootstrapObjects(o BootstrapOptions) ([]Object, error) {
	token := o.Token
	if token == "" && r.cfg.Cluster.Secrets != nil {
		token = r.cfg.Cluster.Secrets.BootstrapToken
	}
	m := tokenFormat.FindStringSubmatch(token)
	if m == nil {
		return nil, fmt.Errorf("render bootstrap objects: the bootstrap token is not ID.SECRET (6 and 16 lowercase letters or digits)")
	}
	id, secret := m[1], m[2]
	c, err := r.cas()
	if err != nil {
		return nil, err
	}

	data := map[string]string{
		"token-id":                       id,
		"token-secret":                   secret,
		"usage-bootstrap-authentication": "true",
		"usage-bootstrap-signing":        "true",
		"auth-extra-groups":              BootstrapGroup,
		"description":                    "Cairn's node bootstrap token (cluster.secrets.bootstrapToken)",
	}
	if !o.Expires.IsZero() {
		data["expiration"] = o.Expires.UTC().Format(time.RFC3339)
	}
	tokenSecret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: metav1.NamespaceSystem},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: data,
	}

	clusterInfo, err := r.clusterInfo([]byte(c.secrets.KubernetesCA.Cert))
	if err != nil {
		return nil, err
	}
	const crbPath = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
	rolesPath := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + metav1.NamespacePublic
	objs := []Object{
		{Path: "/api/v1/namespaces/kube-system/secrets", Name: tokenSecret.Name, Object: tokenSecret},
		crb(crbPath, "cairn:kubelet-bootstrap", nodeBootstrapperRole, BootstrapGroup),
		crb(crbPath, "cairn:node-autoapprove-bootstrap", nodeClientRole, BootstrapGroup),
		crb(crbPath, "cairn:node-autoapprove-certificate-rotation", selfNodeClientRole, NodesGroup),
		// A node resetting itself cordons and drains itself with its own credential (no node holds an admin
		// one); NodeRestriction still limits it to its own Node and its own pods.
		{Path: "/apis/rbac.authorization.k8s.io/v1/clusterroles", Name: NodeDrainerRole, Object: &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: NodeDrainerRole},
			Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"get", "patch"}, APIGroups: []string{""}, Resources: []string{"nodes"}},
				{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
				{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"pods/eviction"}},
			},
		}},
		crb(crbPath, NodeDrainerRole, NodeDrainerRole, NodesGroup),
		{Path: "/api/v1/namespaces/kube-public/configmaps", Name: clusterInfo.Name, Object: clusterInfo},
		{Path: rolesPath + "/roles", Name: "cairn:bootstrap-signer-clusterinfo", Object: &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: "cairn:bootstrap-signer-clusterinfo", Namespace: metav1.NamespacePublic},
			Rules: []rbacv1.PolicyRule{{
				Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
				ResourceNames: []string{clusterInfo.Name},
			}},
		}},
		{Path: rolesPath + "/rolebindings", Name: "cairn:bootstrap-signer-clusterinfo", Object: &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "cairn:bootstrap-signer-clusterinfo", Namespace: metav1.NamespacePublic},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cairn:bootstrap-signer-clusterinfo"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "system:anonymous"}},
		}},
	}
	return objs, nil
}

func crb(path, name, role, group string) Object {
	return Object{Path: path, Name: name, Object: &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
	}}
}

// clusterInfo is kube-public/cluster-info: a kubeconfig with only the endpoint and the CA, which the
// bootstrap signer signs with every signing token (a joining node checks it against its token).
func (r *Renderer) clusterInfo(caCert []byte) (*corev1.ConfigMap, error) {
	kc := clientcmdv1.Config{
		Kind: "Config", APIVersion: "v1",
		Clusters: []clientcmdv1.NamedCluster{{
			Name: "", Cluster: clientcmdv1.Cluster{Server: r.endpoint, CertificateAuthorityData: caCert},
		}},
	}
	data, err := yaml.Marshal(kc)
	if err != nil {
		return nil, fmt.Errorf("encode cluster-info: %w", err)
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: metav1.NamespacePublic},
		Data:       map[string]string{"kubeconfig": strings.TrimSpace(string(data)) + "\n"},
	}, nil
}
