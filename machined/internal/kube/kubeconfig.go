package kube

import (
	"fmt"
	"time"

	"github.com/cairn-os/cairn/api/pki"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// Kubeconfigs renders the control plane's kubeconfigs under /etc/kubernetes, each with a fresh client
// certificate signed by the cluster CA and embedded (no file references, so a kubeconfig is complete
// on its own): admin.conf for people (pointing at the cluster endpoint), and controller-manager.conf,
// scheduler.conf and kubelet.conf for this node's components (pointing at the local kube-apiserver).
func (r *Renderer) Kubeconfigs(now time.Time) (Files, error) {
	c, err := r.cas()
	if err != nil {
		return nil, err
	}
	specs := []struct {
		file   string
		server string
		req    pki.Request
	}{
		{AdminConf, r.endpoint, adminRequest()},
		{ControllerManagerConf, r.localAPIServer(), pki.Request{CommonName: ControllerManager, Client: true}},
		{SchedulerConf, r.localAPIServer(), pki.Request{CommonName: SchedulerUser, Client: true}},
		{KubeletConf, r.localAPIServer(), pki.Request{
			CommonName: nodeUserPrefix + r.node.Name, Organization: []string{NodesGroup}, Client: true,
		}},
	}
	var files Files
	for _, s := range specs {
		data, err := r.certKubeconfig(c, s.server, s.req, now)
		if err != nil {
			return nil, fmt.Errorf("render %s: %w", s.file, err)
		}
		files = append(files, File{Path: r.layout.KubernetesFile(s.file), Data: data, Mode: modeSecret})
	}
	return files.sorted(), nil
}

// AdminKubeconfig is what the Kubeconfig RPC returns: the cluster endpoint, the cluster CA and a fresh
// cluster-admin client certificate.
func (r *Renderer) AdminKubeconfig(now time.Time) ([]byte, error) {
	c, err := r.cas()
	if err != nil {
		return nil, err
	}
	return r.certKubeconfig(c, r.endpoint, adminRequest(), now)
}

func adminRequest() pki.Request {
	return pki.Request{CommonName: AdminCN, Organization: []string{MastersGroup}, Client: true}
}

func (r *Renderer) certKubeconfig(c *cas, server string, req pki.Request, now time.Time) ([]byte, error) {
	p, err := c.kubernetes.Sign(req, now)
	if err != nil {
		return nil, err
	}
	return r.kubeconfig(server, []byte(c.secrets.KubernetesCA.Cert), req.CommonName,
		clientcmdv1.AuthInfo{ClientCertificateData: p.Cert, ClientKeyData: p.Key})
}

// BootstrapKubeconfig is a worker kubelet's --bootstrap-kubeconfig: the internal endpoint (the kubelet
// writes its kubelet.conf with the same server), the cluster CA
// (from the join ticket) and the bootstrap token, which may only create a CSR for the node's own
// client certificate.
func (r *Renderer) BootstrapKubeconfig(caCert []byte, token string) ([]byte, error) {
	if _, err := pki.ParseCert(caCert); err != nil {
		return nil, fmt.Errorf("render %s: cluster CA: %w", BootstrapKubeletConf, err)
	}
	if token == "" {
		return nil, fmt.Errorf("render %s: the bootstrap token is empty", BootstrapKubeletConf)
	}
	return r.kubeconfig(r.InternalEndpoint(), caCert, "tls-bootstrap-token-user", clientcmdv1.AuthInfo{Token: token})
}

// kubeconfig is a one-cluster, one-user, one-context kubeconfig.
func (r *Renderer) kubeconfig(server string, caCert []byte, user string, auth clientcmdv1.AuthInfo) ([]byte, error) {
	cluster := r.cfg.Cluster.Name
	context := user + "@" + cluster
	cfg := clientcmdv1.Config{
		Kind:       "Config",
		APIVersion: "v1",
		Clusters: []clientcmdv1.NamedCluster{{
			Name:    cluster,
			Cluster: clientcmdv1.Cluster{Server: server, CertificateAuthorityData: caCert},
		}},
		AuthInfos: []clientcmdv1.NamedAuthInfo{{Name: user, AuthInfo: auth}},
		Contexts: []clientcmdv1.NamedContext{{
			Name:    context,
			Context: clientcmdv1.Context{Cluster: cluster, AuthInfo: user},
		}},
		CurrentContext: context,
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode kubeconfig: %w", err)
	}
	return data, nil
}
