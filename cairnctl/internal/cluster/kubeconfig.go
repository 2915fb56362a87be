package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cairn-os/cairn/api/client"
	"github.com/cairn-os/cairn/api/machine"
)

// RewriteServer points every cluster of a kubeconfig at server. The node's kubeconfig names the
// cluster endpoint on the VMs' L2, which the host cannot reach; the host reaches the API through the
// first control plane's forwarded port instead. The apiserver's certificate names 127.0.0.1, so TLS
// verification still holds. Everything else in the file is kept as it is.
func RewriteServer(kubeconfig []byte, server string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(kubeconfig, &doc); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("kubeconfig: not a YAML mapping")
	}
	clusters := mapValue(doc.Content[0], "clusters")
	if clusters == nil || clusters.Kind != yaml.SequenceNode || len(clusters.Content) == 0 {
		return nil, errors.New("kubeconfig: no clusters")
	}
	for i, c := range clusters.Content {
		s := mapValue(mapValue(c, "cluster"), "server")
		if s == nil {
			return nil, fmt.Errorf("kubeconfig: clusters[%d].cluster.server is missing", i)
		}
		s.Value, s.Tag, s.Style = server, "!!str", 0
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return b.Bytes(), nil
}

// mapValue is the value of key in a YAML mapping, nil if n is not a mapping or lacks the key.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// writeFirstKubeconfig writes the cluster's admin kubeconfig from the first control plane.
func writeFirstKubeconfig(ctx context.Context, res *Result, dir string, first NodeState, cctx *client.Context, p *Progress) error {
	kc := filepath.Join(dir, KubeconfigFile)
	switch err := writeKubeconfig(ctx, first, cctx, kc); {
	case status.Code(err) == codes.Unimplemented:
		p.Printf("warning: %s cannot give a kubeconfig yet (%v); no %s written", first.Name, status.Convert(err).Message(), kc)
	case err != nil:
		return fmt.Errorf("node %s: kubeconfig: %w", first.Name, err)
	default:
		res.Kubeconfig = kc
		p.Printf("wrote %s (server https://127.0.0.1:%d)", kc, first.Ports[KubePort])
	}
	return nil
}

// writeKubeconfig fetches the admin kubeconfig and points it at the node's forwarded API port.
func writeKubeconfig(ctx context.Context, n NodeState, cctx *client.Context, path string) error {
	mc, conn, err := client.Connect(client.Options{Endpoint: n.APIEndpoint(), Context: cctx})
	if err != nil {
		return err
	}
	defer conn.Close()
	r, err := mc.Kubeconfig(ctx, &machine.KubeconfigRequest{})
	if err != nil {
		return err
	}
	data, err := RewriteServer(r.Kubeconfig, fmt.Sprintf("https://127.0.0.1:%d", n.Ports[KubePort]))
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
