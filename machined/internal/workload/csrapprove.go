package workload

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubelet serving certificates. Each kubelet asks the cluster for its serving certificate with a CSR
// (serverTLSBootstrap) and renews it the same way before it expires (rotateCertificates); the controller
// manager signs what is approved. Kubernetes ships no approver for serving CSRs, because whether a node
// may be called by a name or an address is the cluster's decision: a control plane's machined approves a
// CSR only when it comes from the node it names, for that node's name and the addresses its Node object
// reports, for serving only.

// kubeletServingSigner is the signer of kubelet serving certificates.
const kubeletServingSigner = "kubernetes.io/kubelet-serving"

// csrApproveInterval is how often a control plane looks for serving CSRs: a new kubelet serves logs and
// exec only once its certificate is signed.
const csrApproveInterval = 10 * time.Second

// approveServingCSRs approves (or denies, saying why) the pending kubelet serving CSRs.
func (w *Workload) approveServingCSRs(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := w.admin()
	if err != nil {
		return
	}
	var list certv1.CertificateSigningRequestList
	q := "/apis/certificates.k8s.io/v1/certificatesigningrequests?fieldSelector=" + url.QueryEscape("spec.signerName="+kubeletServingSigner)
	if err := c.Get(ctx, q, &list); err != nil {
		return
	}
	for _, csr := range list.Items {
		if decided(csr) {
			continue
		}
		nodeName := strings.TrimPrefix(csr.Spec.Username, "system:node:")
		var node corev1.Node
		if err := c.Get(ctx, "/api/v1/nodes/"+url.PathEscape(nodeName), &node); err != nil || len(node.Status.Addresses) == 0 {
			continue // the Node is not registered, or has no addresses yet: ask again later
		}
		problem := servingCSRProblem(csr, &node)
		cond := certv1.CertificateSigningRequestCondition{Type: certv1.CertificateApproved, Status: corev1.ConditionTrue,
			Reason: "CairnNodeServing", Message: "the node's own name and addresses, for serving", LastUpdateTime: metav1.Now()}
		if problem != "" {
			cond.Type, cond.Reason, cond.Message = certv1.CertificateDenied, "CairnNodeServing", problem
		}
		csr.Status.Conditions = append(csr.Status.Conditions, cond)
		body, err := json.Marshal(csr)
		if err != nil {
			continue
		}
		if err := c.Put(ctx, "/apis/certificates.k8s.io/v1/certificatesigningrequests/"+url.PathEscape(csr.Name)+"/approval", body); err != nil {
			w.Log.Warn("kubelet serving CSR", "csr", csr.Name, "node", nodeName, "error", err)
			continue
		}
		if problem != "" {
			w.Log.Warn("denied a kubelet serving CSR", "csr", csr.Name, "node", nodeName, "reason", problem)
		} else {
			w.Log.Info("approved a kubelet serving CSR", "csr", csr.Name, "node", nodeName)
		}
	}
}

func decided(csr certv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certv1.CertificateApproved || c.Type == certv1.CertificateDenied || c.Type == certv1.CertificateFailed {
			return true
		}
	}
	return false
}

// servingCSRProblem says why a kubelet serving CSR must not be signed, or "" when it may: it comes from
// the node it names (system:node:NAME in system:nodes), asks for serving usages only, and names only that
// node's name, the hostnames and the addresses its Node object reports.
func servingCSRProblem(csr certv1.CertificateSigningRequest, node *corev1.Node) string {
	want := "system:node:" + node.Name
	if csr.Spec.Username != want || !slices.Contains(csr.Spec.Groups, "system:nodes") {
		return fmt.Sprintf("requested by %q, not the node %s", csr.Spec.Username, node.Name)
	}
	for _, u := range csr.Spec.Usages {
		switch u {
		case certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageServerAuth:
		default:
			return fmt.Sprintf("usage %q is not for serving", u)
		}
	}
	block, _ := pem.Decode(csr.Spec.Request)
	if block == nil {
		return "the request is not PEM"
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return "the request does not parse: " + err.Error()
	}
	if req.Subject.CommonName != want || !slices.Equal(req.Subject.Organization, []string{"system:nodes"}) {
		return fmt.Sprintf("subject %q is not CN=%s, O=system:nodes", req.Subject, want)
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return "the request names e-mail addresses or URIs"
	}
	names := []string{node.Name}
	var ips []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			ips = append(ips, a.Address)
		}
	}
	for _, n := range req.DNSNames {
		if !slices.Contains(names, n) {
			return fmt.Sprintf("name %q is not node %s's (%s)", n, node.Name, strings.Join(names, ", "))
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.Contains(ips, ip.String()) {
			return fmt.Sprintf("address %s is not node %s's (%s)", ip, node.Name, strings.Join(ips, ", "))
		}
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return "the request names no name or address to serve"
	}
	return ""
}
