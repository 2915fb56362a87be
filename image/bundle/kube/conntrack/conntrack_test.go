package conntrack

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestDialUsesChosenDialer checks that the returned function dials with the
// chosen function, names and tracing notwithstanding, and by default with a
// plain dialer: prometheus/common/config's HTTP clients dial through it.
func TestDialUsesChosenDialer(t *testing.T) {
	errChosen := errors.New("chosen dialer")
	var got string
	chosen := func(_ context.Context, network, addr string) (net.Conn, error) {
		got = network + " " + addr
		return nil, errChosen
	}
	dial := NewDialContextFunc(DialWithDialContextFunc(chosen), DialWithTracing(), DialWithName("scrape"))
	if _, err := dial(context.Background(), "tcp", "192.0.2.1:80"); !errors.Is(err, errChosen) || got != "tcp 192.0.2.1:80" {
		t.Errorf("dial = %v, called with %q; want the chosen dialer's error, called with %q", err, got, "tcp 192.0.2.1:80")
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := NewDialContextFunc(DialWithName("default"))(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("default dialer: dial %s: %v", l.Addr(), err)
	}
	c.Close()
}
