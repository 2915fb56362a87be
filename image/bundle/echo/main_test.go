package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	tests := []struct {
		method, path string
		wantCode     int
		wantBody     string
	}{
		{"GET", "/", 200, "pod-a\n" + Greeting + "\n"},
		{"GET", "/healthz", 200, "ok\n"},
		{"GET", "/other", 404, ""},
		{"POST", "/", 405, ""},
	}
	h := handler("pod-a")
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.wantCode {
			t.Errorf("%s %s code = %d, want %d", tt.method, tt.path, rec.Code, tt.wantCode)
		}
		if tt.wantBody != "" && rec.Body.String() != tt.wantBody {
			t.Errorf("%s %s body = %q, want %q", tt.method, tt.path, rec.Body.String(), tt.wantBody)
		}
	}
}

func TestServeStopsOnCancel(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, addr, handler("pod-b")) }()

	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	if want := "pod-b\n" + Greeting + "\n"; body != want {
		t.Errorf("GET / = %q, want %q", body, want)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve() after cancel = %v, want nil", err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("serve() did not return after cancel")
	}
}
