package joinsvc

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cairn-os/cairn/machined/internal/kubeapi"
)

// fakeSecrets is one API server's view of one Secret, with resourceVersion compare-and-swap.
type fakeSecrets struct {
	mu     sync.Mutex
	secret *corev1.Secret
	rv     int
	puts   int
}

func (f *fakeSecrets) Get(_ context.Context, path string, v any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.secret == nil || path != tokensSecretPath {
		return &kubeapi.StatusError{Code: 404, Body: "not found"}
	}
	b, _ := json.Marshal(f.secret)
	return json.Unmarshal(b, v)
}

func (f *fakeSecrets) Create(_ context.Context, _ string, obj []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.secret != nil {
		return nil // kubeapi.Client.Create: an existing object is not an error
	}
	var s corev1.Secret
	if err := json.Unmarshal(obj, &s); err != nil {
		return err
	}
	f.rv++
	s.ResourceVersion = strconv.Itoa(f.rv)
	f.secret = &s
	return nil
}

func (f *fakeSecrets) Put(_ context.Context, _ string, obj []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s corev1.Secret
	if err := json.Unmarshal(obj, &s); err != nil {
		return err
	}
	if s.ResourceVersion != f.secret.ResourceVersion {
		return &kubeapi.StatusError{Code: 409, Body: "the object has been modified"}
	}
	f.rv++
	f.puts++
	s.ResourceVersion = strconv.Itoa(f.rv)
	f.secret = &s
	return nil
}

// TestClusterTokensAcrossControlPlanes checks what keeping the tokens in the cluster promises: a token
// made on one control plane admits a node at another, a single-use token admits one node however many
// ask at once at however many control planes, and a token revoked at one is refused at all.
func TestClusterTokensAcrossControlPlanes(t *testing.T) {
	api := &fakeSecrets{}
	store := ClusterStore{API: func() (SecretAPI, error) { return api, nil }}
	cp1, cp2 := NewTokens(store, nil), NewTokens(store, nil)
	ctx := context.Background()

	tok, _, err := cp1.Create(ctx, RoleWorker, time.Hour, 1)
	if err != nil {
		t.Fatalf("Create on cp1: %v", err)
	}
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens := cp1
			if i%2 == 1 {
				tokens = cp2
			}
			if _, err := tokens.Use(ctx, tok); err == nil {
				admitted.Add(1)
			} else if !strings.Contains(err.Error(), "used up") {
				t.Errorf("Use: %v, want admitted or used up", err)
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 1 {
		t.Errorf("a single-use token admitted %d nodes across two control planes, want 1", n)
	}

	tok2, _, err := cp2.Create(ctx, RoleControlPlane, time.Hour, 3)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cp1.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List on cp1 = %+v, %v; want both tokens", list, err)
	}
	if err := cp1.Revoke(ctx, tok2); err != nil {
		t.Fatalf("Revoke on cp1: %v", err)
	}
	if _, err := cp2.Use(ctx, tok2); err == nil || !strings.Contains(err.Error(), "unknown token") {
		t.Errorf("Use on cp2 of a token revoked on cp1 = %v, want refused", err)
	}
	if err := cp2.Revoke(ctx, "nosuch"); err == nil {
		t.Error("Revoke of an unknown ID succeeded; a typo must not look like a revocation")
	}
	if strings.Contains(string(api.secret.Data[tokensSecretKey]), strings.SplitN(tok, ".", 2)[1]) {
		t.Error("the Secret holds a token's secret; it must hold only its hash")
	}
}

// failingSecrets is an API server whose reads of the Secret fail with err.
type failingSecrets struct {
	fakeSecrets
	err error
}

func (f *failingSecrets) Get(context.Context, string, any) error { return f.err }

// racedSecrets is an API server where another control plane's update wins every race.
type racedSecrets struct{ fakeSecrets }

func (f *racedSecrets) Put(context.Context, string, []byte) error {
	return &kubeapi.StatusError{Code: 409, Body: "the object has been modified"}
}

// A read the API server did not answer is the cluster's failure (ClusterError, which the APIs answer
// with a retry): make e2e-ha's third control plane could not get a join token while the first one's API
// server timed out its read of the Secret. A read it refused (a credential it does not take) is not.
func TestClusterStoreBusyAPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		busy bool
	}{
		{"timed out", errors.New(`Get "https://127.0.0.1:6443/api/v1/namespaces/kube-system/secrets/cairn-join-tokens": net/http: timeout awaiting response headers`), true},
		{"etcd timed out", &kubeapi.StatusError{Code: 504, Body: "Timeout: request did not complete within requested timeout"}, true},
		{"throttled", &kubeapi.StatusError{Code: 429, Body: "too many requests"}, true},
		{"forbidden", &kubeapi.StatusError{Code: 403, Body: "forbidden"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &failingSecrets{err: tc.err}
			tokens := NewTokens(ClusterStore{API: func() (SecretAPI, error) { return api, nil }}, time.Now)
			_, _, err := tokens.Create(t.Context(), RoleWorker, time.Minute, 1)
			if !errors.Is(err, tc.err) || errors.As(err, new(*ClusterError)) != tc.busy {
				t.Errorf("Create while reads fail with %v = %v; want that error, a ClusterError: %v", tc.err, err, tc.busy)
			}
		})
	}
}

// Losing every race to other control planes' updates is the cluster's failure too: asked later, the
// update may win.
func TestClusterStoreRaced(t *testing.T) {
	api := &racedSecrets{}
	tokens := NewTokens(ClusterStore{API: func() (SecretAPI, error) { return api, nil }}, time.Now)
	if _, _, err := tokens.Create(t.Context(), RoleWorker, time.Minute, 1); !errors.As(err, new(*ClusterError)) || !strings.Contains(err.Error(), "kept changing") {
		t.Errorf("Create while every update loses its race = %v, want a ClusterError saying the Secret kept changing", err)
	}
}
