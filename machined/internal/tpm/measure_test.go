package tpm

import (
	"testing"
	"time"
)

// A cluster ID or role that differs measures differently: a quote tells them apart.
func TestLockEventsDiffer(t *testing.T) {
	now := time.Unix(0, 0)
	a := LockEvent("c-1", "controlplane", now).Digest
	for _, other := range []Event{LockEvent("c-2", "controlplane", now), LockEvent("c-1", "worker", now), LockEvent("c-1\x00role worker", "", now)} {
		if other.Digest == a {
			t.Errorf("LockEvent(%q, %q) measures like (c-1, controlplane)", other.ClusterID, other.Role)
		}
	}
}

func TestNoTPM(t *testing.T) {
	if _, err := Open(t.TempDir() + "/tpmrm0"); err != ErrNoTPM {
		t.Errorf("Open(missing) = %v, want ErrNoTPM", err)
	}
	st, err := (&Measurer{}).MeasureLock(t.TempDir(), "c", "worker")
	if err != nil || st.Present {
		t.Errorf("MeasureLock without a TPM = %+v, %v; want nothing, no error", st, err)
	}
}
