package imds

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen serves each connection to a loopback listener with ServeConn, as QEMU runs one command per
// guest connection, and returns the base URL.
func listen(t *testing.T, s Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s.ServeConn(c, c)
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

func do(t *testing.T, c *http.Client, method, url string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestIMDSv2(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, []byte("kind: JoinConfig\n"), "worker-7"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	base := listen(t, Server{Dir: dir, Now: func() time.Time { return now }})
	keepAlive := &http.Client{}
	// A client that opens a new connection for every request: the token must outlive its connection.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	code, tok := do(t, keepAlive, http.MethodPut, base+"/latest/api/token", map[string]string{ttlHeader: "300"})
	if code != http.StatusOK || tok == "" {
		t.Fatalf("PUT /latest/api/token = %d %q, want 200 and a token", code, tok)
	}
	other := Server{Dir: t.TempDir()}
	if err := Write(other.Dir, nil, "x"); err != nil {
		t.Fatal(err)
	}
	otherTok, err := other.token(now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The expiry is the token's first 8 bytes: its 7th character encodes part of the seconds.
	edited := []byte(tok)
	if edited[6] == 'A' {
		edited[6] = 'B'
	} else {
		edited[6] = 'A'
	}
	for _, tt := range []struct {
		name         string
		client       *http.Client
		method, path string
		header       map[string]string
		wantCode     int
		wantBody     string
	}{
		{"user data with the token", keepAlive, "GET", "/latest/user-data", map[string]string{tokenHeader: tok}, 200, "kind: JoinConfig\n"},
		{"token on a later connection", fresh, "GET", "/latest/meta-data/local-hostname", map[string]string{tokenHeader: tok}, 200, "worker-7"},
		{"IMDSv1: no token", fresh, "GET", "/latest/user-data", nil, 401, ""},
		{"a token signed by another node's key", fresh, "GET", "/latest/user-data", map[string]string{tokenHeader: otherTok}, 401, ""},
		{"a token edited to last longer", fresh, "GET", "/latest/user-data", map[string]string{tokenHeader: string(edited)}, 401, ""},
		{"garbage token", fresh, "GET", "/latest/user-data", map[string]string{tokenHeader: "nope"}, 401, ""},
		{"unknown path", fresh, "GET", "/latest/meta-data/iam/info", map[string]string{tokenHeader: tok}, 404, ""},
		{"token by GET", fresh, "GET", "/latest/api/token", map[string]string{ttlHeader: "300"}, 405, ""},
		{"token without a TTL", fresh, "PUT", "/latest/api/token", nil, 400, ""},
		{"token TTL over six hours", fresh, "PUT", "/latest/api/token", map[string]string{ttlHeader: "21601"}, 400, ""},
		{"token through a proxy", fresh, "PUT", "/latest/api/token", map[string]string{ttlHeader: "300", "X-Forwarded-For": "10.0.0.1"}, 403, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, tt.client, tt.method, base+tt.path, tt.header)
			if code != tt.wantCode || (tt.wantBody != "" && body != tt.wantBody) {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}

	now = now.Add(301 * time.Second)
	if code, _ := do(t, fresh, "GET", base+"/latest/user-data", map[string]string{tokenHeader: tok}); code != http.StatusUnauthorized {
		t.Errorf("GET with a token past its TTL = %d, want 401", code)
	}

	log, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "PUT /latest/api/token 200") || strings.Contains(string(log), tok) ||
		strings.Contains(string(log), "JoinConfig") {
		t.Errorf("%s = %q, want one line per request, without tokens or user data", LogFile, log)
	}
}

// A connection that ends in the middle of a request is not an error: the guest went away.
func TestServeConnEndsWithTheConnection(t *testing.T) {
	s := Server{Dir: t.TempDir()}
	var out strings.Builder
	if err := s.ServeConn(strings.NewReader("GET /latest/user-da"), &out); err != nil {
		t.Errorf("ServeConn(half a request) = %v, want nil", err)
	}
	err := s.ServeConn(strings.NewReader("NOT HTTP\r\n\r\n"), &out)
	if err != nil || !strings.HasPrefix(out.String(), "HTTP/1.1 400") {
		t.Errorf("ServeConn(garbage) = %v, %q; want a 400 answer", err, out.String())
	}
}
