package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// The sources, each as its platform documents it. Base URLs and directories are fields so tests point
// them at a fake server or a temporary directory.

// NoCloudDir is a NoCloud seed on a mounted volume labelled CIDATA (or cidata): user-data and meta-data
// files at its root. Dir is where machined mounted it; "" when there is no such volume.
type NoCloudDir struct{ Dir string }

func (NoCloudDir) Name() string { return "nocloud" }

func (s NoCloudDir) Fetch(context.Context) (*Metadata, error) {
	if s.Dir == "" {
		return nil, ErrAbsent
	}
	ud, err := readLimited(filepath.Join(s.Dir, "user-data"), userDataLimit)
	if err != nil {
		return nil, err
	}
	md, err := readLimited(filepath.Join(s.Dir, "meta-data"), metadataLimit)
	if err != nil {
		return nil, err
	}
	nc, err := readLimited(filepath.Join(s.Dir, "network-config"), networkConfigLimit)
	if err != nil {
		return nil, err
	}
	return &Metadata{UserData: ud, Hostname: noCloudHostname(md), NetworkConfig: nc}, nil
}

// NoCloudURL is a NoCloud seed served over HTTP (ds=nocloud;s=URL on the kernel command line): URL/user-data
// and URL/meta-data.
type NoCloudURL struct {
	URL    string
	Client *http.Client
}

func (NoCloudURL) Name() string { return "nocloud" }

func (s NoCloudURL) Fetch(ctx context.Context) (*Metadata, error) {
	if s.URL == "" {
		return nil, ErrAbsent
	}
	base := strings.TrimSuffix(s.URL, "/") + "/"
	c := client(s.Client)
	get := func(name string, limit int64) ([]byte, error) {
		return request(ctx, c, http.MethodGet, base+name, nil, limit)
	}
	ud, err := get("user-data", userDataLimit)
	if err != nil {
		return nil, err
	}
	md, err := get("meta-data", metadataLimit)
	if err != nil {
		return nil, err
	}
	nc, err := get("network-config", networkConfigLimit)
	if err != nil {
		return nil, err
	}
	return &Metadata{UserData: ud, Hostname: noCloudHostname(md), NetworkConfig: nc}, nil
}

// noCloudHostname reads local-hostname from NoCloud's meta-data (YAML; the one key Cairn reads is a plain
// `key: value` line).
func noCloudHostname(md []byte) string {
	for _, l := range strings.Split(string(md), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "local-hostname" {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// EC2 is an EC2-style instance metadata service, IMDSv2 only: a session token asked for with a PUT, then
// GETs carrying it. A service that answers only v1 is not used (a v1 GET can be made by anything that
// can make a pod or a process fetch a URL).
type EC2 struct {
	Base   string // default http://169.254.169.254
	Client *http.Client
}

func (EC2) Name() string { return "ec2" }

func (s EC2) Fetch(ctx context.Context) (*Metadata, error) {
	base := orDefault(s.Base, "http://169.254.169.254")
	c := client(s.Client)
	token, err := request(ctx, c, http.MethodPut, base+"/latest/api/token",
		http.Header{"X-Aws-Ec2-Metadata-Token-Ttl-Seconds": {"300"}}, metadataLimit)
	var status *statusError
	if errors.As(err, &status) {
		return nil, fmt.Errorf("the metadata service refused an IMDSv2 session token (%w); IMDSv1 is not used", err)
	}
	if err != nil {
		return nil, err
	}
	if len(token) == 0 {
		return nil, fmt.Errorf("%w: the metadata service gave no IMDSv2 token", ErrAbsent)
	}
	get := func(path string, limit int64) ([]byte, error) {
		return request(ctx, c, http.MethodGet, base+path, http.Header{"X-Aws-Ec2-Metadata-Token": {string(token)}}, limit)
	}
	ud, err := get("/latest/user-data", userDataLimit)
	if err != nil {
		return nil, err
	}
	host, err := get("/latest/meta-data/local-hostname", metadataLimit)
	if err != nil {
		return nil, err
	}
	return &Metadata{UserData: ud, Hostname: strings.TrimSpace(string(host))}, nil
}

// GCE is Google Compute Engine's metadata server; every request carries Metadata-Flavor: Google, and an
// answer without that header is not GCE's.
type GCE struct {
	Base   string // default http://metadata.google.internal
	Client *http.Client
}

func (GCE) Name() string { return "gce" }

func (s GCE) Fetch(ctx context.Context) (*Metadata, error) {
	base := orDefault(s.Base, "http://metadata.google.internal") + "/computeMetadata/v1/instance/"
	flavored := false
	c := withFlavorCheck(client(s.Client), &flavored)
	get := func(path string, limit int64) ([]byte, error) {
		return request(ctx, c, http.MethodGet, base+path, http.Header{"Metadata-Flavor": {"Google"}}, limit)
	}
	// The hostname first: it is always there, so its answer says whether this is GCE.
	host, err := get("hostname", metadataLimit)
	if err != nil {
		return nil, err
	}
	if !flavored {
		return nil, fmt.Errorf("%w: the answer lacks Metadata-Flavor: Google", ErrAbsent)
	}
	ud, err := get("attributes/user-data", userDataLimit)
	if err != nil {
		return nil, err
	}
	return &Metadata{UserData: ud, Hostname: strings.TrimSpace(string(host))}, nil
}

// withFlavorCheck wraps a client so that it records whether an answer carried Metadata-Flavor: Google.
func withFlavorCheck(c *http.Client, flavored *bool) *http.Client {
	cc := *c
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if err == nil && resp.Header.Get("Metadata-Flavor") == "Google" {
			*flavored = true
		}
		return resp, err
	})
	return &cc
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// OpenStack is an OpenStack config drive (a volume labelled config-2) mounted at Dir:
// openstack/latest/user_data and openstack/latest/meta_data.json.
type OpenStack struct{ Dir string }

func (OpenStack) Name() string { return "openstack" }

func (s OpenStack) Fetch(context.Context) (*Metadata, error) {
	if s.Dir == "" {
		return nil, ErrAbsent
	}
	latest := filepath.Join(s.Dir, "openstack", "latest")
	md, err := readLimited(filepath.Join(latest, "meta_data.json"), metadataLimit)
	if err != nil {
		return nil, err
	}
	if md == nil {
		return nil, fmt.Errorf("%w: the config drive has no openstack/latest/meta_data.json", ErrAbsent)
	}
	var meta struct {
		Hostname string `json:"hostname"`
	}
	if err := json.Unmarshal(md, &meta); err != nil {
		return nil, fmt.Errorf("openstack/latest/meta_data.json: %w", err)
	}
	ud, err := readLimited(filepath.Join(latest, "user_data"), userDataLimit)
	if err != nil {
		return nil, err
	}
	nd, err := readLimited(filepath.Join(latest, "network_data.json"), networkConfigLimit)
	if err != nil {
		return nil, err
	}
	return &Metadata{UserData: ud, Hostname: meta.Hostname, NetworkData: nd}, nil
}

// readLimited reads a file of a seed volume: nil when it is not there, an error when it is bigger than
// limit.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a node reads", path, st.Size(), limit)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}

// request is httpGet of one method, URL and headers.
func request(ctx context.Context, c *http.Client, method, url string, header http.Header, limit int64) ([]byte, error) {
	return httpGet(ctx, c, func(ctx context.Context) (*http.Request, error) {
		r, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err == nil {
			for k, v := range header {
				r.Header[k] = v
			}
		}
		return r, err
	}, limit)
}

func client(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return newClient()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return strings.TrimSuffix(s, "/")
}
