package workload

import (
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
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

// TestProxyRulesWritten reads kube-proxy's /healthz answers as kube-proxy 1.37 writes them: before its
// first sync it says healthy with no family listed, and the service-dns check must not send its query.
func TestProxyRulesWritten(t *testing.T) {
	const synced = `{"lastUpdated":"2026-12-04T18:40:02Z","currentTime":"2026-12-04T18:40:02Z","nodeEligible":true,"healthy":true,` +
		`"status":{"IPv4":{"lastUpdated":"2026-12-04T18:40:01Z","healthy":true}}}`
	for _, tc := range []struct {
		name    string
		body    string
		family  corev1.IPFamily
		wantErr string
	}{
		{"starting, no rules yet", `{"lastUpdated":"2026-12-04T18:40:02Z","currentTime":"2026-12-04T18:40:02Z","nodeEligible":true,"healthy":true}`,
			corev1.IPv4Protocol, "has not written its IPv4 rules"},
		{"synced", synced, corev1.IPv4Protocol, ""},
		{"late with an update since (503), its rules written", `{"lastUpdated":"2026-12-04T18:39:01Z","currentTime":"2026-12-04T18:40:02Z",` +
			`"nodeEligible":true,"healthy":false,"status":{"IPv4":{"lastUpdated":"2026-12-04T18:39:01Z","healthy":false}}}`, corev1.IPv4Protocol, ""},
		{"the other family synced", synced, corev1.IPv6Protocol, "has not written its IPv6 rules"},
		{"not kube-proxy's answer", "404 page not found", corev1.IPv4Protocol, "healthz answer"},
	} {
		err := proxyRulesWritten([]byte(tc.body), tc.family)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: proxyRulesWritten = %v, want error containing %q", tc.name, err, tc.wantErr)
		}
	}
}
