package etcdops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The JSON forms of the etcd messages used here, as etcd's gateway writes them: protobuf field names,
// 64-bit integers as strings, zero values left out.
type member struct {
	ID         uint64   `json:"ID,string"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

type memberListResponse struct {
	Members []member `json:"members"`
}

type memberAddRequest struct {
	PeerURLs  []string `json:"peerURLs"`
	IsLearner bool     `json:"isLearner"`
}

type memberAddResponse struct {
	Member  member   `json:"member"`
	Members []member `json:"members"`
}

type memberIDRequest struct {
	ID uint64 `json:"ID,string"`
}

// statusResponse is the part of a member's maintenance status Cairn reads: whom it follows.
type statusResponse struct {
	Leader uint64 `json:"leader,string"`
}

type snapshotMessage struct {
	Result *struct {
		RemainingBytes uint64 `json:"remaining_bytes,string"`
		Blob           []byte `json:"blob"`
	} `json:"result"`
	Error *StatusError `json:"error"`
}

// StatusError is an error etcd answered with: the gRPC code and message of its API.
type StatusError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *StatusError) Error() string { return e.Message }

// httpClient makes a client for one operation with the client certificate; the caller closes its idle
// connections when done, so nothing stays open between operations. idleConns is how many idle
// connections it keeps between its calls (0: the transport's default, two).
func (c *Client) httpClient(idleConns int) (*http.Client, error) {
	tc, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc, ResponseHeaderTimeout: c.timeout(), DialContext: c.Dial,
		MaxIdleConnsPerHost: idleConns}}, nil
}

// call posts req as JSON to path on the first endpoint that answers and decodes the answer into resp
// (nil: discard it). It returns a *StatusError when etcd refuses.
func (c *Client) call(ctx context.Context, hc *http.Client, path string, req, resp any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	body, err := c.post(ctx, hc, path, req)
	if err != nil {
		return err
	}
	defer body.Close()
	if resp == nil {
		_, err = io.Copy(io.Discard, body)
		return err
	}
	return json.NewDecoder(body).Decode(resp)
}

// post sends the request to each endpoint in turn until one answers, and returns the body of a
// successful answer.
func (c *Client) post(ctx context.Context, hc *http.Client, path string, req any) (io.ReadCloser, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ep := range c.endpoints() {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(ep, "/")+path, bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		r.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.StatusCode != http.StatusOK {
			defer res.Body.Close()
			return nil, statusError(res)
		}
		return res.Body, nil
	}
	return nil, errors.Join(errs...)
}

// statusError reads the gateway's error answer ({"code": 9, "message": "etcdserver: ..."}).
func statusError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var e StatusError
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		return &e
	}
	return fmt.Errorf("HTTP %s: %s", res.Status, bytes.TrimSpace(b))
}

// snapshot copies the snapshot stream into w. etcd sends the database in chunks and then its SHA-256
// as a last chunk of its own; a stream that ends without a trailer matching the data it followed was
// cut short, and is an error rather than a snapshot that looks whole.
func (c *Client) snapshot(ctx context.Context, hc *http.Client, w io.Writer) error {
	body, err := c.post(ctx, hc, "/v3/maintenance/snapshot", struct{}{})
	if err != nil {
		return err
	}
	defer body.Close()
	return copySnapshot(body, w)
}

// copySnapshot writes the blobs of the gateway's snapshot stream (one {"result": ...} or {"error": ...}
// object per message) to w, checking the trailer.
func copySnapshot(stream io.Reader, w io.Writer) error {
	dec := json.NewDecoder(stream)
	data := sha256.New()
	var last []byte // written one chunk behind, so the trailer can be checked against what came before
	for {
		var m snapshotMessage
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if m.Error != nil {
			return m.Error
		}
		if m.Result == nil {
			continue
		}
		if last != nil {
			if _, err := w.Write(last); err != nil {
				return err
			}
			data.Write(last)
		}
		last = m.Result.Blob
	}
	if len(last) != sha256.Size || !bytes.Equal(last, data.Sum(nil)) {
		return errors.New("the snapshot stream ended before etcd's checksum of it: incomplete")
	}
	_, err := w.Write(last)
	return err
}
