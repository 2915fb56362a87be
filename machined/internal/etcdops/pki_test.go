package etcdops

import (
	"testing"

	"github.com/cairn-os/cairn/machined/internal/etcdops/etcdtest"
)

// testPKI is a throwaway etcd CA, a server/peer certificate for 127.0.0.1 and a client certificate, in
// the kubeadm layout's file names.
type testPKI = etcdtest.PKI

func newTestPKI(t *testing.T, dir string) testPKI { return etcdtest.NewPKI(t, dir) }
