package cluster

import (
	"regexp"
	"testing"
	"time"

	"github.com/cairn-os/cairn/api/config"
)

// A recovery key is made only for a config that asks for an encrypted STATE, is long enough for the
// node to accept, and differs each time.
func TestStateRecoveryKey(t *testing.T) {
	gen, err := config.Generate(config.GenOptions{ClusterName: "demo", Endpoint: "https://10.5.0.2:6443", Now: time.Now()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := config.Marshal(gen.Worker)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := StateRecoveryKey(plain); err != nil || k != "" {
		t.Errorf("StateRecoveryKey(unencrypted) = %q, %v; want none", k, err)
	}
	gen.Worker.Machine.Disks.State.Encryption = config.EncryptionTPM
	enc, err := config.Marshal(gen.Worker)
	if err != nil {
		t.Fatal(err)
	}
	k1, err := StateRecoveryKey(enc)
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := StateRecoveryKey(enc)
	if !regexp.MustCompile(`^[A-Z2-7]{4}(-[A-Z2-7]{4}){7}$`).MatchString(k1) || k1 == k2 {
		t.Errorf("StateRecoveryKey(encrypted) = %q then %q; want two different ABCD-... keys of 32 characters", k1, k2)
	}
}
