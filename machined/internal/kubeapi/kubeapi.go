// Package kubeapi is the little of the Kubernetes API machined needs, over plain HTTPS with client
// certificates: readiness, reading a Node, creating objects. machined does not need client-go's caches,
// retries and codecs for that, nor their weight in PID 1.
package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"
)

// Client talks to one API server.
type Client struct {
	Server string
	http   *http.Client
	// slow serves Fetch: no header or overall timeout of its own, the caller's context bounds it.
	slow *http.Client
}

// New makes a client for server with the given PEM CA and client certificate.
func New(server string, caPEM, certPEM, keyPEM []byte) (*Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("kubeapi: no CA certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: client certificate: %w", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ResponseHeaderTimeout: 20 * time.Second, IdleConnTimeout: 30 * time.Second}
	slow := tr.Clone()
	slow.ResponseHeaderTimeout = 0
	return &Client{Server: strings.TrimSuffix(server, "/"), http: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		slow: &http.Client{Transport: slow}}, nil
}

// FromKubeconfig makes a client from a kubeconfig file with embedded certificates; server, when not
// empty, replaces the kubeconfig's.
func FromKubeconfig(path, server string) (*Client, error) {
	k, err := readKubeconfig(path, server)
	if err != nil {
		return nil, err
	}
	return New(string(k.server), k.ca, k.cert, k.key)
}

// credentials are what a client is made of: the server and the PEM CA, certificate and key.
type credentials struct{ server, ca, cert, key []byte }

func readKubeconfig(path, server string) (credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return credentials{}, err
	}
	k, _, err := parseKubeconfig(path, data, server)
	return k, err
}

// parseKubeconfig reads the credentials of the kubeconfig data read from path, and names the file it
// took the client certificate from, if not from data itself.
func parseKubeconfig(path string, data []byte, server string) (k credentials, certFile string, err error) {
	var kc clientcmdv1.Config
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return credentials{}, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if len(kc.Clusters) == 0 || len(kc.AuthInfos) == 0 {
		return credentials{}, "", fmt.Errorf("kubeconfig %s: no cluster or user", path)
	}
	c, u := kc.Clusters[0].Cluster, kc.AuthInfos[0].AuthInfo
	cert, key := u.ClientCertificateData, u.ClientKeyData
	if len(cert) == 0 && u.ClientCertificate != "" {
		// The kubelet's rotated credential: one PEM file with both.
		certFile = u.ClientCertificate
		both, err := os.ReadFile(certFile)
		if err != nil {
			return credentials{}, "", err
		}
		cert, key = both, both
	}
	if server == "" {
		server = c.Server
	}
	return credentials{server: []byte(server), ca: c.CertificateAuthorityData, cert: cert, key: key}, certFile, nil
}

// StatusError is a response with an unexpected HTTP status.
type StatusError struct {
	Code int
	Body string // shortened for messages
	// Causes are the types of the causes in the Status the API server sent (e.g. NamespaceTerminating).
	Causes []string
}

// statusError makes the error of a response with status code and body data.
func statusError(code int, data []byte) *StatusError {
	msg := strings.TrimSpace(string(data))
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	se := &StatusError{Code: code, Body: msg}
	var st metav1.Status
	if json.Unmarshal(data, &st) == nil && st.Details != nil {
		for _, c := range st.Details.Causes {
			se.Causes = append(se.Causes, string(c.Type))
		}
	}
	return se
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// IsNotFound reports a 404.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// IsConflict reports a 409: an update whose resourceVersion is no longer current, or a create of an
// object that exists.
func IsConflict(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusConflict
}

// IsInvalid reports a request the API server refused for what it says (400, 422): sending it again
// cannot succeed.
func IsInvalid(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Code == http.StatusBadRequest || se.Code == http.StatusUnprocessableEntity)
}

// IsRefused reports a 4xx answer other than 408 (request timeout) and 429 (too many requests): the API
// server refused the request for what it is (its credential, its object), and the same request sent
// again is refused again. Anything else (a 5xx, a timeout, a dropped connection) may pass later.
func IsRefused(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code >= 400 && se.Code < 500 &&
		se.Code != http.StatusRequestTimeout && se.Code != http.StatusTooManyRequests
}

// IsNamespaceTerminating reports a 403 for a create in a namespace that is being deleted (the cause
// NamespaceTerminating in the Status the API server sends): an eviction there is refused, and the
// namespace's deletion removes the pod anyway.
func IsNamespaceTerminating(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusForbidden {
		return false
	}
	return slices.Contains(se.Causes, string(corev1.NamespaceTerminatingCause))
}

// Get reads path into v (JSON).
func (c *Client) Get(ctx context.Context, path string, v any) error {
	body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

// Create posts an object; one that exists already is not an error (every caller is idempotent).
func (c *Client) Create(ctx context.Context, path string, obj []byte) error {
	_, err := c.do(ctx, http.MethodPost, path, obj)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusConflict {
		return nil
	}
	return err
}

// Put replaces an object. With metadata.resourceVersion set in obj it is a compare-and-swap: an object
// changed since that version is not replaced, and the error is a conflict (IsConflict).
func (c *Client) Put(ctx context.Context, path string, obj []byte) error {
	_, err := c.do(ctx, http.MethodPut, path, obj)
	return err
}

// Patch applies a JSON merge patch.
func (c *Client) Patch(ctx context.Context, path string, patch []byte) error {
	_, err := c.doType(ctx, http.MethodPatch, path, patch, "application/merge-patch+json")
	return err
}

// Apply is a server-side apply of obj (a complete object, JSON) to its item path, owned by
// fieldManager. Force takes over fields another manager set: what Cairn applies is Cairn's to keep as
// rendered, while fields Cairn does not set stay as others left them.
func (c *Client) Apply(ctx context.Context, path string, obj []byte, fieldManager string) error {
	q := url.Values{"fieldManager": {fieldManager}, "force": {"true"}}
	_, err := c.doType(ctx, http.MethodPatch, path+"?"+q.Encode(), obj, "application/apply-patch+yaml")
	return err
}

// Delete deletes an object; one already gone is not an error.
func (c *Client) Delete(ctx context.Context, path string) error {
	_, err := c.do(ctx, http.MethodDelete, path, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// Fetch reads path as accept and discards the body, returning its size: it exists to make the API
// server compute and cache a response (its OpenAPI documents) before a user asks for it. Only ctx
// bounds how long the server may take to answer.
func (c *Client) Fetch(ctx context.Context, path, accept string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", accept)
	resp, err := c.slow.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, statusError(resp.StatusCode, msg)
	}
	return io.Copy(io.Discard, resp.Body)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	return c.doType(ctx, method, path, body, "application/json")
}

func (c *Client) doType(ctx context.Context, method, path string, body []byte, contentType string) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(resp.StatusCode, data)
	}
	return data, nil
}
