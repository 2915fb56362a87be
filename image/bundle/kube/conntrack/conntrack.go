// Package conntrack declares what prometheus/common/config uses of
// github.com/mwitkow/go-conntrack (NewDialContextFunc and its options), with
// no tracing and no connection counters: the dial functions it returns dial
// with the chosen dialer and nothing else.
//
// Nothing in the kube binary makes such an HTTP client at run time (CoreDNS's
// metrics plugin serves, it does not scrape), and the original's counters,
// registered with Prometheus' default registry but never given a dialer
// name, exported no series. What goes is golang.org/x/net/trace, which the
// original imports for its optional per-connection traces: that package's
// init links html/template, and with it Go's linker keeps every exported
// method of every type in the binary.
package conntrack

import (
	"context"
	"net"
)

// DialContextFunc dials a connection, like net.Dialer.DialContext.
type DialContextFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// dialer is what the options choose.
type dialer struct {
	dial DialContextFunc
}

// DialOption chooses how NewDialContextFunc's function dials.
type DialOption func(*dialer)

// DialWithName names the dialer in the original's counters and traces;
// there are none here.
func DialWithName(string) DialOption { return func(*dialer) {} }

// DialWithTracing turns on the original's per-connection traces; there are
// none here.
func DialWithTracing() DialOption { return func(*dialer) {} }

// DialWithDialContextFunc dials with f.
func DialWithDialContextFunc(f DialContextFunc) DialOption {
	return func(o *dialer) { o.dial = f }
}

// NewDialContextFunc returns a function that dials as the options say, by
// default with a zero net.Dialer.
func NewDialContextFunc(opts ...DialOption) DialContextFunc {
	d := dialer{dial: (&net.Dialer{}).DialContext}
	for _, o := range opts {
		o(&d)
	}
	return d.dial
}
