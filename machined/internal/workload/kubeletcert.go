package workload

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/cairn-os/cairn/machined/internal/atomicfile"
)

// The kubelet keeps its client credential in a certificate store under its --cert-dir: a dated
// kubelet-client-<time>.pem holding a certificate and its key, and kubelet-client-current.pem, a symlink
// to the pair in use, which the kubelet replaces when it rotates the pair (rotateCertificates).
//
// A control plane's kubelet.conf embeds a pair machined signed for the node (system:node:<name> in
// system:nodes, by the cluster CA). Finding no pair in its store, the kubelet takes an embedded one for a
// bootstrap credential and asks the cluster for a new pair at once: client-go's certificate manager treats
// it as kubeadm's high-powered credential, to be rotated out. On a new control plane that request is
// signed as soon as the controller-manager's signer runs, and the kubelet then closes every connection to
// the API server to use the new pair: in the middle of starting the add-ons' first pods, whose ConfigMap
// and token mounts failed and were retried with backoff (measured: one cluster create, 2026-11-29). The
// embedded pair is already the node's own, so machined puts it in the store, and the kubelet rotates it in
// its own time, at 70–90 % of its life.
const (
	kubeletClientPrefix  = "kubelet-client"
	kubeletClientCurrent = kubeletClientPrefix + "-current.pem"
	// kubeletStoreTime is how the kubelet's store dates its files.
	kubeletStoreTime = "2006-01-02-15-04-05"
)

// seedKubeletClient puts the client pair embedded in the kubeconfig conf into the kubelet's certificate
// store certDir, when the store has no readable pair, or one for another name or from another cluster CA, or
// one that expires before the embedded pair (renewCertificates renewed kubelet.conf). A pair the kubelet rotated itself expires
// later and is kept. A kubeconfig with no embedded pair (a worker's, which its kubelet writes after its TLS
// bootstrap) or no kubeconfig at all leaves the store to the kubelet. It reports the file it wrote, or "".
func seedKubeletClient(conf, certDir string, now time.Time) (string, error) {
	data, err := os.ReadFile(conf)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return "", fmt.Errorf("%s: %w", conf, err)
	}
	if len(kc.AuthInfos) == 0 || len(kc.AuthInfos[0].AuthInfo.ClientCertificateData) == 0 {
		return "", nil
	}
	u := kc.AuthInfos[0].AuthInfo
	want, err := tls.X509KeyPair(u.ClientCertificateData, u.ClientKeyData)
	if err != nil {
		return "", fmt.Errorf("%s: its client pair: %w", conf, err)
	}
	current := filepath.Join(certDir, kubeletClientCurrent)
	if have, err := tls.LoadX509KeyPair(current, current); err == nil &&
		have.Leaf.Subject.CommonName == want.Leaf.Subject.CommonName &&
		!have.Leaf.NotAfter.Before(want.Leaf.NotAfter) && signedBy(have.Leaf, kc) {
		return "", nil
	}
	name := kubeletClientPrefix + "-" + now.UTC().Format(kubeletStoreTime) + ".pem"
	pair := append(append([]byte{}, u.ClientCertificateData...), u.ClientKeyData...)
	if err := atomicfile.WriteFile(filepath.Join(certDir, name), pair, 0o600); err != nil {
		return "", err
	}
	// The kubelet replaces the link the same way when it rotates; it refuses to replace anything but a
	// link. Relative, so the store reads the same from the kubelet's container and in sandbox mode.
	tmp := current + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.Symlink(name, tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, current); err != nil {
		return "", err
	}
	return filepath.Join(certDir, name), atomicfile.SyncDir(certDir)
}

// signedBy reports whether cert was signed by the cluster CA that the kubeconfig kc trusts (true when kc
// names none). A pair left in the store by a cluster since made again (a new CA) would not authenticate.
func signedBy(cert *x509.Certificate, kc clientcmdv1.Config) bool {
	if len(kc.Clusters) == 0 || len(kc.Clusters[0].Cluster.CertificateAuthorityData) == 0 {
		return true
	}
	block, _ := pem.Decode(kc.Clusters[0].Cluster.CertificateAuthorityData)
	if block == nil {
		return true
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	return err != nil || cert.CheckSignatureFrom(ca) == nil
}
