package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("hello from p on n (ip)\n"))
	}))
	defer srv.Close()

	var out strings.Builder
	if err := probe([]string{"--lookup", "localhost", "--get", srv.URL, "--count", "2"}, &out); err != nil {
		t.Fatalf("probe = %v\n%s", err, out.String())
	}
	if got := strings.Count(out.String(), "get "+srv.URL+": hello from p on n (ip)"); got != 2 {
		t.Errorf("probe printed %d answers, want 2:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "lookup localhost: ") {
		t.Errorf("probe printed no lookup line:\n%s", out.String())
	}

	out.Reset()
	if err := probe([]string{"--get", srv.URL + "/missing"}, &out); err == nil || !strings.Contains(out.String(), "HTTP 404") {
		t.Errorf("probe of a 404 = %v, want a failure naming HTTP 404:\n%s", err, out.String())
	}
}

func TestGreeting(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		pod, node, ip, hostname, addr string
		want                          string
	}{
		{"downward API", "web-1", "cp1", "10.244.0.5", "web-1", "10.244.0.5", "hello from web-1 on cp1 (10.244.0.5)\n"},
		{"kubectl create deployment", "", "", "", "hello-7d9-x2", "10.244.1.3", "hello from hello-7d9-x2 (10.244.1.3)\n"},
		{"env wins over the fallbacks", "a", "", "10.0.0.1", "b", "10.0.0.2", "hello from a (10.0.0.1)\n"},
	} {
		if got := greeting(tc.pod, tc.node, tc.ip, tc.hostname, tc.addr); got != tc.want {
			t.Errorf("%s: greeting(%q, %q, %q, %q, %q) = %q, want %q", tc.name, tc.pod, tc.node, tc.ip, tc.hostname, tc.addr, got, tc.want)
		}
	}
}
