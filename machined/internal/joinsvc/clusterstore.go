package joinsvc

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// The Secret that holds the cluster's join tokens: their IDs, roles, expiry, uses left and the SHA-256 of
// each secret, never a secret itself. In kube-system, so only cluster admins can read or change it.
const (
	tokensSecretNamespace = "kube-system"
	tokensSecretName      = "cairn-join-tokens"
	tokensSecretKey       = "tokens.json"
	tokensSecretPath      = "/api/v1/namespaces/" + tokensSecretNamespace + "/secrets/" + tokensSecretName
)

// maxConflicts bounds the retries of an update that keeps losing the race to other control planes.
const maxConflicts = 20

// SecretAPI is the little of the Kubernetes API the cluster store uses (kubeapi.Client).
type SecretAPI interface {
	Get(ctx context.Context, path string, v any) error
	// Create makes an object; one that exists already is not an error.
	Create(ctx context.Context, path string, obj []byte) error
	// Put replaces an object, refusing with a conflict if its resourceVersion is no longer current.
	Put(ctx context.Context, path string, obj []byte) error
}

// ClusterStore keeps the join tokens in a Secret of the cluster, so every control plane honours every
// token, a token is spent once cluster-wide, and revoking it anywhere revokes it everywhere. Each update
// is a compare-and-swap on the Secret's resourceVersion. API gives a client for the node's own API
// server, made at each use: the admin credential exists only once the node has rendered it.
type ClusterStore struct {
	API func() (SecretAPI, error)
}

// Update implements Store. A read or write the API server did not refuse outright is a ClusterError: on
// a busy control plane it answers late or not at all, and the same update asked again later succeeds
// (make e2e-ha: a third control plane's join token could not be made while the first one's API server
// timed out its read of the Secret).
func (s ClusterStore) Update(ctx context.Context, f func([]byte) ([]byte, error)) error {
	api, err := s.API()
	if err != nil {
		return fmt.Errorf("join tokens are kept in the cluster, whose API this node cannot reach: %w", err)
	}
	for range maxConflicts {
		var sec corev1.Secret
		err := api.Get(ctx, tokensSecretPath, &sec)
		if kubeapi.IsNotFound(err) {
			if err := api.Create(ctx, "/api/v1/namespaces/"+tokensSecretNamespace+"/secrets", emptyTokensSecret()); err != nil {
				return apiError(fmt.Errorf("create the Secret %s/%s: %w", tokensSecretNamespace, tokensSecretName, err))
			}
			continue
		}
		if err != nil {
			return apiError(fmt.Errorf("read the Secret %s/%s: %w", tokensSecretNamespace, tokensSecretName, err))
		}
		out, err := f(sec.Data[tokensSecretKey])
		if err != nil {
			return err
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[tokensSecretKey] = out
		body, err := json.Marshal(&sec) // carries the resourceVersion read: the compare of the swap
		if err != nil {
			return err
		}
		err = api.Put(ctx, tokensSecretPath, body)
		if kubeapi.IsConflict(err) {
			continue // another control plane changed the tokens meanwhile: read them again
		}
		if err != nil {
			return apiError(fmt.Errorf("write the Secret %s/%s: %w", tokensSecretNamespace, tokensSecretName, err))
		}
		return nil
	}
	// Other control planes' updates won every race: theirs, not this request's, and one may pass later.
	return &ClusterError{Err: fmt.Errorf("the Secret %s/%s kept changing under %d updates in a row", tokensSecretNamespace, tokensSecretName, maxConflicts)}
}

// apiError marks err, a failed call of the API (the tokens' Secret, a rejoining node's Node), as the
// cluster's (ClusterError) unless the API server refused the call for what it is.
func apiError(err error) error {
	if kubeapi.IsRefused(err) {
		return err
	}
	return &ClusterError{Err: err}
}

func emptyTokensSecret() []byte {
	sec := corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: tokensSecretName, Namespace: tokensSecretNamespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "cairn"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{tokensSecretKey: []byte("[]")},
	}
	b, _ := json.Marshal(&sec)
	return b
}
