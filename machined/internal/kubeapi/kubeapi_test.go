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

// TestFetch checks that Fetch asks for the representation it is given (the OpenAPI v2 cache kubectl
// reads is the protobuf one) and reports the body's size, or the server's refusal.
func TestFetch(t *testing.T) {
	const proto = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/openapi/v2" {
			http.NotFound(w, r)
			return
		}
		if a := r.Header.Get("Accept"); a != proto {
			http.Error(w, "unexpected Accept "+a, http.StatusNotAcceptable)
			return
		}
		w.Write(make([]byte, 12345))
	}))
	defer srv.Close()
	c := &Client{Server: srv.URL, slow: srv.Client()}
	n, err := c.Fetch(context.Background(), "/openapi/v2", proto)
	if err != nil || n != 12345 {
		t.Errorf("Fetch(/openapi/v2) = %d, %v; want 12345, nil", n, err)
	}
	_, err = c.Fetch(context.Background(), "/openapi/v3/nowhere", proto)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusNotFound {
		t.Errorf("Fetch of a missing path = %v, want the server's 404", err)
	}
}

// An eviction in a namespace being deleted is refused with a 403 whose Status names the cause, in a body
// longer than the message an error keeps; another 403 is not that refusal.
func TestIsNamespaceTerminating(t *testing.T) {
	terminating := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"hello-6d5f7c9b8-x2x9k\" is forbidden: unable to create new content in namespace workloads because it is being terminated","reason":"Forbidden","details":{"name":"hello-6d5f7c9b8-x2x9k","kind":"pods","causes":[{"reason":"NamespaceTerminating","message":"namespace workloads is being terminated","field":"metadata.namespace"}]},"code":403}`
	forbidden := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods is forbidden: User \"system:node:w1\" cannot create resource \"pods/eviction\"","reason":"Forbidden","details":{"kind":"pods"},"code":403}`
	for _, tc := range []struct {
		name, body string
		code       int
		want       bool
	}{
		{"terminating namespace", terminating, http.StatusForbidden, true},
		{"other refusal", forbidden, http.StatusForbidden, false},
		{"not found", `{"kind":"Status","code":404}`, http.StatusNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, tc.body, tc.code)
			}))
			defer srv.Close()
			c := &Client{Server: srv.URL, http: srv.Client()}
			err := c.Create(context.Background(), "/api/v1/namespaces/workloads/pods/hello/eviction", []byte(`{}`))
			if got := IsNamespaceTerminating(err); got != tc.want {
				t.Errorf("IsNamespaceTerminating(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}
