// Package imds is an EC2-style instance metadata service (IMDSv2) for local VMs, so a node made with
// `cairnctl cluster add --userdata=ec2` finds its user data the way it would on a cloud: at
// 169.254.169.254, through a session token asked for with a PUT.
//
// QEMU's user network runs a command for each TCP connection the guest opens to a forwarded address
// (guestfwd=...-cmd:), with the connection as the command's standard input and output. ServeConn is
// that command's body: it answers the HTTP requests of one connection and returns when the guest
// closes it. Nothing runs between connections, so the service needs no daemon that outlives cairnctl;
// a token made on one connection is honoured on the next because it is signed with a key kept in the
// node's metadata directory, not remembered.
package imds

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Files in a node's metadata directory.
const (
	UserDataFile = "user-data"
	HostnameFile = "local-hostname"
	keyFile      = "token.key"
	// LogFile records one line per request (method, path, status): what the guest asked, for a test or
	// a user to read. It never holds a token or the user data.
	LogFile = "requests.log"
)

// Address is where the guest reaches the service, as on EC2.
const Address = "169.254.169.254:80"

// Headers of IMDSv2.
const (
	tokenHeader = "X-Aws-Ec2-Metadata-Token"
	ttlHeader   = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	maxTTL      = 21600 // six hours, EC2's limit
)

// Write creates a node's metadata directory: its user data, its hostname and the key that signs its
// session tokens. The directory is private: the user data holds a join token.
func Write(dir string, userData []byte, hostname string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	for name, data := range map[string][]byte{UserDataFile: userData, HostnameFile: []byte(hostname), keyFile: key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Exists says whether dir holds a node's metadata (Write was called for it).
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, keyFile))
	return err == nil
}

// Server answers from one node's metadata directory.
type Server struct {
	Dir string
	Now func() time.Time // default time.Now
}

// ServeConn answers the requests read from r on w until r ends or a request asks to close.
func (s Server) ServeConn(r io.Reader, w io.Writer) error {
	br := bufio.NewReader(r)
	for {
		req, err := http.ReadRequest(br)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return writeResponse(w, http.StatusBadRequest, nil, true)
		}
		// A request body is never used; drain it so the next request starts where it should.
		if _, err := io.Copy(io.Discard, io.LimitReader(req.Body, 1<<20)); err != nil {
			return err
		}
		req.Body.Close()
		status, body := s.answer(req)
		s.log(req, status)
		if err := writeResponse(w, status, body, req.Close); err != nil || req.Close {
			return err
		}
	}
}

// answer is the service's behaviour for one request, IMDSv2 only: a GET without a valid token is 401,
// as on an instance configured with HttpTokens=required.
func (s Server) answer(req *http.Request) (int, []byte) {
	if req.URL.Path == "/latest/api/token" {
		if req.Method != http.MethodPut {
			return http.StatusMethodNotAllowed, nil
		}
		// EC2 refuses a token request that went through a proxy: a process that can only make
		// something else fetch a URL must not get a token.
		if req.Header.Get("X-Forwarded-For") != "" {
			return http.StatusForbidden, nil
		}
		ttl, err := strconv.Atoi(req.Header.Get(ttlHeader))
		if err != nil || ttl < 1 || ttl > maxTTL {
			return http.StatusBadRequest, nil
		}
		tok, err := s.token(s.now().Add(time.Duration(ttl) * time.Second))
		if err != nil {
			return http.StatusInternalServerError, nil
		}
		return http.StatusOK, []byte(tok)
	}
	if req.Method != http.MethodGet {
		return http.StatusMethodNotAllowed, nil
	}
	if !s.valid(req.Header.Get(tokenHeader)) {
		return http.StatusUnauthorized, nil
	}
	var file string
	switch req.URL.Path {
	case "/latest/user-data":
		file = UserDataFile
	case "/latest/meta-data/local-hostname", "/latest/meta-data/hostname", "/latest/meta-data/instance-id":
		file = HostnameFile
	default:
		return http.StatusNotFound, nil
	}
	data, err := os.ReadFile(filepath.Join(s.Dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return http.StatusNotFound, nil
	}
	if err != nil {
		return http.StatusInternalServerError, nil
	}
	return http.StatusOK, data
}

// token is the expiry time and an HMAC of it under the directory's key.
func (s Server) token(expiry time.Time) (string, error) {
	key, err := os.ReadFile(filepath.Join(s.Dir, keyFile))
	if err != nil {
		return "", err
	}
	msg := binary.BigEndian.AppendUint64(nil, uint64(expiry.Unix()))
	mac := hmac.New(sha256.New, key)
	mac.Write(msg)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(msg)), nil
}

func (s Server) valid(tok string) bool {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) != 8+sha256.Size {
		return false
	}
	expiry := time.Unix(int64(binary.BigEndian.Uint64(raw[:8])), 0)
	want, err := s.token(expiry)
	return err == nil && hmac.Equal([]byte(want), []byte(tok)) && s.now().Before(expiry)
}

func (s Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// log appends the request's line to LogFile; a failure to log does not fail the answer.
func (s Server) log(req *http.Request, status int) {
	f, err := os.OpenFile(filepath.Join(s.Dir, LogFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s %d\n", s.now().UTC().Format(time.RFC3339), req.Method, req.URL.Path, status)
}

func writeResponse(w io.Writer, status int, body []byte, closing bool) error {
	resp := http.Response{
		StatusCode: status, ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain"}, "Server": {"cairnctl-imds"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Close:         closing,
	}
	return resp.Write(w)
}
