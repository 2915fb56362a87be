package workload

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestDroppedHere(t *testing.T) {
	send := &net.OpError{Op: "write", Net: "udp", Err: os.NewSyscallError("write", syscall.EPERM)}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"the send refused, as the resolver reports it", &net.DNSError{Err: send.Error(), Name: "kubernetes.default.svc.cluster.local."}, true},
		{"the send refused, as the dialer returns it", send, true},
		{"no answer", &net.DNSError{Err: "i/o timeout", IsTimeout: true}, false},
		{"refused by the far end", &net.OpError{Op: "read", Net: "udp", Err: os.NewSyscallError("read", syscall.ECONNREFUSED)}, false},
		{"no such name", errors.New("no such host"), false},
	} {
		if got := droppedHere(tc.err); got != tc.want {
			t.Errorf("%s: droppedHere(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
