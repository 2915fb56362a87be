package platform

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
)

const userData = "apiVersion: cairn.dev/v1alpha1\nkind: JoinConfig\n"

// fastClient keeps a test's slow-server cases short.
func fastClient() *http.Client {
	c := newClient()
	c.Timeout = 300 * time.Millisecond
	return c
}

// imds is a fake EC2-style metadata service; v1Only refuses tokens as a service with IMDSv2 off does.
func imds(t *testing.T, ud string, v1Only bool) *httptest.Server {
	const token = "tok-123"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			if v1Only || r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			w.Write([]byte(token))
		case r.Header.Get("X-aws-ec2-metadata-token") != token:
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case r.URL.Path == "/latest/user-data" && ud != "":
			w.Write([]byte(ud))
		case r.URL.Path == "/latest/meta-data/local-hostname":
			w.Write([]byte("ip-10-0-0-7.ec2.internal\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestEC2(t *testing.T) {
	t.Run("IMDSv2", func(t *testing.T) {
		m, err := EC2{Base: imds(t, userData, false).URL, Client: fastClient()}.Fetch(context.Background())
		if err != nil || string(m.UserData) != userData || m.Hostname != "ip-10-0-0-7.ec2.internal" {
			t.Fatalf("Fetch() = %+v, %v", m, err)
		}
	})
	t.Run("no user data", func(t *testing.T) {
		m, err := EC2{Base: imds(t, "", false).URL, Client: fastClient()}.Fetch(context.Background())
		if err != nil || m.UserData != nil {
			t.Fatalf("Fetch() = %+v, %v; want metadata without user data", m, err)
		}
	})
	t.Run("IMDSv1 only: refused, not used", func(t *testing.T) {
		_, err := EC2{Base: imds(t, userData, true).URL, Client: fastClient()}.Fetch(context.Background())
		if err == nil || errors.Is(err, ErrAbsent) || !strings.Contains(err.Error(), "IMDSv1 is not used") {
			t.Fatalf("Fetch() error = %v, want the token refusal named", err)
		}
	})
	t.Run("oversized user data", func(t *testing.T) {
		_, err := EC2{Base: imds(t, strings.Repeat("x", config.MaxUserData+1), false).URL, Client: fastClient()}.Fetch(context.Background())
		if err == nil || errors.Is(err, ErrAbsent) || !strings.Contains(err.Error(), "more than") {
			t.Fatalf("Fetch() error = %v, want the size named", err)
		}
	})
	t.Run("nobody there", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close() // a closed port: connection refused
		if _, err := (EC2{Base: url, Client: fastClient()}).Fetch(context.Background()); !errors.Is(err, ErrAbsent) {
			t.Fatalf("Fetch() error = %v, want ErrAbsent", err)
		}
	})
	t.Run("too slow: absent, within its timeouts", func(t *testing.T) {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}))
		defer srv.Close()
		start := time.Now()
		_, err := EC2{Base: srv.URL, Client: fastClient()}.Fetch(context.Background())
		if !errors.Is(err, ErrAbsent) {
			t.Fatalf("Fetch() error = %v, want ErrAbsent", err)
		}
		if n := calls.Load(); n != attempts {
			t.Errorf("the service was asked %d times, want %d (retries)", n, attempts)
		}
		if d := time.Since(start); d > 4*time.Second {
			t.Errorf("a slow service held the search %v", d)
		}
	})
	t.Run("a server error, then an answer", func(t *testing.T) {
		var calls atomic.Int32
		inner := imds(t, userData, false)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				http.Error(w, "starting", http.StatusServiceUnavailable)
				return
			}
			inner.Config.Handler.ServeHTTP(w, r)
		}))
		defer srv.Close()
		if m, err := (EC2{Base: srv.URL, Client: fastClient()}).Fetch(context.Background()); err != nil || string(m.UserData) != userData {
			t.Fatalf("Fetch() = %+v, %v", m, err)
		}
	})
}

func TestGCE(t *testing.T) {
	gce := func(flavor bool) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Metadata-Flavor") != "Google" {
				http.Error(w, "missing flavor", http.StatusForbidden)
				return
			}
			if flavor {
				w.Header().Set("Metadata-Flavor", "Google")
			}
			switch r.URL.Path {
			case "/computeMetadata/v1/instance/hostname":
				w.Write([]byte("node-1.c.project.internal"))
			case "/computeMetadata/v1/instance/attributes/user-data":
				w.Write([]byte(userData))
			default:
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	m, err := GCE{Base: gce(true).URL, Client: fastClient()}.Fetch(context.Background())
	if err != nil || string(m.UserData) != userData || m.Hostname != "node-1.c.project.internal" {
		t.Fatalf("Fetch() = %+v, %v", m, err)
	}
	// Something answers, but not as GCE's server does: not this platform.
	if _, err := (GCE{Base: gce(false).URL, Client: fastClient()}).Fetch(context.Background()); !errors.Is(err, ErrAbsent) {
		t.Errorf("Fetch() from a server without Metadata-Flavor = %v, want ErrAbsent", err)
	}
}

func TestNoCloud(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("user-data", userData)
	write("meta-data", "instance-id: i-1\nlocal-hostname: 'node-7'\n")
	m, err := NoCloudDir{Dir: dir}.Fetch(context.Background())
	if err != nil || string(m.UserData) != userData || m.Hostname != "node-7" {
		t.Fatalf("NoCloudDir.Fetch() = %+v, %v", m, err)
	}
	if _, err := (NoCloudDir{}).Fetch(context.Background()); !errors.Is(err, ErrAbsent) {
		t.Errorf("NoCloudDir without a volume = %v, want ErrAbsent", err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	m, err = NoCloudURL{URL: srv.URL + "/", Client: fastClient()}.Fetch(context.Background())
	if err != nil || string(m.UserData) != userData || m.Hostname != "node-7" {
		t.Fatalf("NoCloudURL.Fetch() = %+v, %v", m, err)
	}
	write("user-data", strings.Repeat("x", config.MaxUserData+1))
	if _, err := (NoCloudDir{Dir: dir}).Fetch(context.Background()); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("NoCloudDir with oversized user-data = %v, want the size named", err)
	}
}

func TestOpenStack(t *testing.T) {
	dir := t.TempDir()
	latest := filepath.Join(dir, "openstack", "latest")
	if err := os.MkdirAll(latest, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := (OpenStack{Dir: dir}).Fetch(context.Background()); !errors.Is(err, ErrAbsent) {
		t.Errorf("a volume without meta_data.json = %v, want ErrAbsent", err)
	}
	os.WriteFile(filepath.Join(latest, "meta_data.json"), []byte(`{"uuid":"u","hostname":"os-node"}`), 0o644)
	os.WriteFile(filepath.Join(latest, "user_data"), []byte(userData), 0o644)
	m, err := OpenStack{Dir: dir}.Fetch(context.Background())
	if err != nil || string(m.UserData) != userData || m.Hostname != "os-node" {
		t.Fatalf("Fetch() = %+v, %v", m, err)
	}
	os.WriteFile(filepath.Join(latest, "meta_data.json"), []byte(`{"hostname":`), 0o644)
	if _, err := (OpenStack{Dir: dir}).Fetch(context.Background()); err == nil || errors.Is(err, ErrAbsent) {
		t.Errorf("a broken meta_data.json = %v, want an error", err)
	}
}

// fakeSource answers as told.
type fakeSource struct {
	name string
	m    *Metadata
	err  error
}

func (f fakeSource) Name() string                             { return f.name }
func (f fakeSource) Fetch(context.Context) (*Metadata, error) { return f.m, f.err }

func TestDiscover(t *testing.T) {
	absent := func(n string) Source { return fakeSource{name: n, err: ErrAbsent} }
	m, tried, err := Discover(context.Background(), []Source{absent("nocloud"), fakeSource{name: "ec2", m: &Metadata{Hostname: "h"}}, absent("gce")})
	if err != nil || m.Platform != "ec2" || len(tried) != 2 {
		t.Fatalf("Discover() = %+v, %v, %v; want ec2 after trying two", m, tried, err)
	}
	// A platform that is there but answers wrongly ends the search: no later source stands in for it.
	_, tried, err = Discover(context.Background(), []Source{fakeSource{name: "nocloud", err: errors.New("user-data too big")}, fakeSource{name: "ec2", m: &Metadata{}}})
	if err == nil || !strings.Contains(err.Error(), "nocloud") || len(tried) != 1 {
		t.Errorf("Discover() = %v, %v; want nocloud's error after one attempt", tried, err)
	}
	if _, _, err := Discover(context.Background(), []Source{absent("a"), absent("b")}); !errors.Is(err, ErrAbsent) {
		t.Errorf("Discover() with no platform = %v, want ErrAbsent", err)
	}
}
