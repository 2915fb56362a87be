// Package platform finds a node's user data and metadata on the platform it boots on (issue 19): the
// kernel command line's choice, a NoCloud seed (a volume labelled CIDATA, or a seed URL), an EC2-style
// instance metadata service (IMDSv2), GCE's metadata server, or an OpenStack config drive. Each source is
// small, answers ErrAbsent when it is not this platform, and is bounded in time, so the search never holds
// the machine API up; Discover tries them in a fixed order and says which answered.
//
// What the user data says is config.ParseUserData's to decide: a Cairn document, never a script.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/cairn-os/cairn/api/config"
)

// ErrAbsent: the source is not this machine's platform (no such volume, nobody answers at the address).
var ErrAbsent = errors.New("not this platform")

// Metadata is what a platform says about the node.
type Metadata struct {
	// Platform names the source that answered: nocloud, ec2, gce, openstack.
	Platform string
	// UserData is the user data as the platform gives it (nil: none); at most config.MaxUserData bytes.
	UserData []byte
	// Hostname is the platform's name for the node ("" when it gives none).
	Hostname string
	// NetworkConfig is NoCloud's network-config as the seed holds it, NetworkData an OpenStack config
	// drive's network_data.json (nil: none); Search parses them.
	NetworkConfig, NetworkData []byte
}

// Source is one platform's metadata.
type Source interface {
	Name() string
	// Fetch returns the platform's metadata, ErrAbsent when the machine is not on it, or another error
	// when it is but its answer is wrong (too big, malformed).
	Fetch(ctx context.Context) (*Metadata, error)
}

// Attempt is one source tried, for status.
type Attempt struct {
	Source string
	Err    error // nil: it answered
}

// Discover tries the sources in order and returns the first that answers, with every attempt. When none
// does, the error says so; a source that is this platform but answers wrongly ends the search with its
// error (a later source must not stand in for the one that is there).
func Discover(ctx context.Context, sources []Source) (*Metadata, []Attempt, error) {
	var tried []Attempt
	for _, s := range sources {
		m, err := s.Fetch(ctx)
		tried = append(tried, Attempt{Source: s.Name(), Err: err})
		switch {
		case err == nil:
			m.Platform = s.Name()
			return m, tried, nil
		case errors.Is(err, ErrAbsent):
			continue
		default:
			return nil, tried, fmt.Errorf("platform %s: %w", s.Name(), err)
		}
	}
	return nil, tried, fmt.Errorf("no platform answered (tried %d sources): %w", len(tried), ErrAbsent)
}

// Timeouts of the metadata services: a link-local service answers in milliseconds; a platform without
// one leaves the connection unanswered, so a short dial bounds the search on bare metal.
const (
	dialTimeout    = 2 * time.Second
	requestTimeout = 5 * time.Second
	attempts       = 3
)

// httpGet performs one request of a metadata service with retries (a service can be slow to come up at
// boot): ErrAbsent when nothing ever answered, the body (at most limit bytes) on 200, nil body on 404.
func httpGet(ctx context.Context, c *http.Client, req func(context.Context) (*http.Request, error), limit int64) ([]byte, error) {
	var last error
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(i) * 500 * time.Millisecond):
			}
		}
		timeout := requestTimeout
		if c.Timeout > 0 {
			timeout = c.Timeout
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		r, err := req(rctx)
		if err != nil {
			cancel()
			return nil, err
		}
		resp, err := c.Do(r)
		if err != nil {
			cancel()
			last = err
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		resp.Body.Close()
		cancel()
		switch {
		case err != nil:
			last = err
			continue
		case resp.StatusCode == http.StatusNotFound:
			return nil, nil
		case resp.StatusCode >= 500:
			last = &statusError{r.Method, r.URL.String(), resp.StatusCode}
			continue
		case resp.StatusCode != http.StatusOK:
			return nil, &statusError{r.Method, r.URL.String(), resp.StatusCode}
		case int64(len(body)) > limit:
			return nil, fmt.Errorf("%s %s: the answer is more than %d bytes", r.Method, r.URL, limit)
		}
		return body, nil
	}
	if last != nil && isNetError(last) {
		return nil, fmt.Errorf("%w: %v", ErrAbsent, last)
	}
	return nil, last
}

// statusError is an answer with an HTTP status other than 200 and 404.
type statusError struct {
	method, url string
	code        int
}

func (e *statusError) Error() string { return fmt.Sprintf("%s %s: HTTP %d", e.method, e.url, e.code) }

// isNetError: nothing answered (refused, unreachable, timed out) rather than a wrong answer.
func isNetError(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}

// newClient is a metadata service's client: no proxy (the service is link-local), short dial.
func newClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = (&net.Dialer{Timeout: dialTimeout}).DialContext
	return &http.Client{Transport: t, Timeout: requestTimeout}
}

// userDataLimit is what a source reads of user data: more is an error, never a cut document.
const userDataLimit = config.MaxUserData

// metadataLimit bounds the small answers (a hostname, a token, a JSON document of metadata).
const metadataLimit = 64 << 10
