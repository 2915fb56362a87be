package kubeapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestApplyIsServerSideApply checks the request the API server must see for a server-side apply: a
// PATCH of the apply content type, with the field manager and force, to the object's own path.
func TestApplyIsServerSideApply(t *testing.T) {
	type seen struct{ method, path, query, contentType, body string }
	var got seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b)}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := &Client{Server: srv.URL, http: srv.Client()}
	obj := `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"coredns","namespace":"kube-system"}}`
	if err := c.Apply(context.Background(), "/api/v1/namespaces/kube-system/serviceaccounts/coredns", []byte(obj), "cairn"); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := seen{http.MethodPatch, "/api/v1/namespaces/kube-system/serviceaccounts/coredns", "fieldManager=cairn&force=true", "application/apply-patch+yaml", obj}
	if got != want {
		t.Errorf("Apply sent %+v, want %+v", got, want)
	}
}

func TestApplyReportsRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"DaemonSet.apps \"kube-proxy\" is invalid"}`, http.StatusUnprocessableEntity)
	}))
	defer srv.Close()
	c := &Client{Server: srv.URL, http: srv.Client()}
	err := c.Apply(context.Background(), "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy", []byte(`{}`), "cairn")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnprocessableEntity {
		t.Fatalf("Apply of an invalid object = %v, want the API server's 422", err)
	}
}
