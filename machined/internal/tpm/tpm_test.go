//go:build cgo

// The simulator is C (the TPM reference implementation): these run where cgo does (make unit, -race).

package tpm

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2/transport/simulator"
)

func simulated(t *testing.T) *TPM {
	t.Helper()
	sim, err := simulator.OpenSimulator()
	if err != nil {
		t.Fatal(err)
	}
	tp := New(sim)
	t.Cleanup(func() { tp.Close() })
	return tp
}

func TestMeasureLock(t *testing.T) {
	tp := simulated(t)
	dir := t.TempDir()
	m := &Measurer{TPM: tp, Now: func() time.Time { return time.Unix(0, 0) }}
	st, err := m.MeasureLock(dir, "c-123", "controlplane")
	if err != nil || !st.Present || !st.Measured || !st.Agrees {
		t.Fatalf("MeasureLock = %+v, %v; want measured and agreeing", st, err)
	}
	// The PCR is the extension of the zeros with the lock event's digest, and nothing else.
	e := LockEvent("c-123", "controlplane", time.Unix(0, 0))
	want, _ := Log{Events: []Event{e}}.Replay()
	if !bytes.Equal(st.PCR, want) || bytes.Equal(want, make([]byte, sha256.Size)) {
		t.Errorf("PCR %d = %x, want %x", PCR, st.PCR, want)
	}
	// Once per boot: a second call (a resumed sequence) does not extend again.
	if st2, err := m.MeasureLock(dir, "c-123", "controlplane"); err != nil || !bytes.Equal(st2.PCR, st.PCR) {
		t.Errorf("second MeasureLock = %+v, %v; want the same PCR", st2, err)
	}
	l, err := ReadLog(dir)
	if err != nil || len(l.Events) != 1 || l.Events[0].ClusterID != "c-123" {
		t.Errorf("log on STATE = %+v, %v", l, err)
	}
	// Someone else extends the PCR: the node sees the disagreement.
	if err := tp.Extend(PCR, sha256.Sum256([]byte("intruder"))); err != nil {
		t.Fatal(err)
	}
	st3, err := m.Check()
	if err == nil || st3.Agrees || !strings.Contains(st3.Error, "something else extended it") {
		t.Errorf("Check after a foreign extend = %+v, %v; want a disagreement", st3, err)
	}
}

func TestReadManyPCRs(t *testing.T) {
	tp := simulated(t)
	if err := tp.Extend(PCR, sha256.Sum256([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	pcrs := []int{23, 15, 0, 1, 2, 3, 4, 5, 6, 7}
	vals, err := tp.Read(pcrs...)
	if err != nil || len(vals) != len(pcrs) {
		t.Fatalf("Read = %d values, %v", len(vals), err)
	}
	if bytes.Equal(vals[1], make([]byte, sha256.Size)) || !bytes.Equal(vals[0], make([]byte, sha256.Size)) {
		t.Errorf("PCR 15 = %x (want extended), PCR 23 = %x (want zeros)", vals[1], vals[0])
	}
	if _, err := tp.Read(24); err == nil {
		t.Error("Read(24) succeeded")
	}
}
