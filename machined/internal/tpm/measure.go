package tpm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cairn-os/cairn/machined/internal/atomicfile"
)

// LogFile is the measurement log's name under STATE.
const LogFile = "tpm-measurements.json"

// Event is one measurement.
type Event struct {
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"` // node-lock
	ClusterID string    `json:"clusterID"`
	Role      string    `json:"role"`
	// Digest is what was extended into the PCR (hex SHA-256 of the event's canonical text).
	Digest string `json:"digest"`
}

// LockEvent is the node lock's measurement: the cluster and the role this node committed to.
func LockEvent(clusterID, role string, now time.Time) Event {
	sum := sha256.Sum256([]byte("cairn node-lock v1\x00cluster " + clusterID + "\x00role " + role))
	return Event{Time: now.UTC(), Kind: "node-lock", ClusterID: clusterID, Role: role, Digest: hex.EncodeToString(sum[:])}
}

// Log is this boot's measurement log.
type Log struct {
	PCR    int     `json:"pcr"`
	Events []Event `json:"events"`
}

// Replay is the value the PCR holds after the log's events, from the zeros of power-on.
func (l Log) Replay() ([]byte, error) {
	pcr := make([]byte, sha256.Size)
	for _, e := range l.Events {
		d, err := hex.DecodeString(e.Digest)
		if err != nil || len(d) != sha256.Size {
			return nil, fmt.Errorf("measurement log: event %s has a bad digest %q", e.Kind, e.Digest)
		}
		s := sha256.Sum256(append(pcr, d...))
		pcr = s[:]
	}
	return pcr, nil
}

// State is what status says about the TPM.
type State struct {
	Present bool
	// Measured: this boot's lock event is in the PCR. Agrees: the PCR holds what the log replays to.
	Measured, Agrees bool
	PCR              []byte
	Error            string
}

// Measurer measures the node lock into a TPM (nil TPM: the machine has none) and keeps the log.
type Measurer struct {
	TPM *TPM
	Now func() time.Time

	measured bool
	log      Log
}

// MeasureLock extends the PCR with the lock's event, once per boot, writes this boot's log to dir (STATE)
// and checks that the PCR agrees with it.
func (m *Measurer) MeasureLock(dir, clusterID, role string) (State, error) {
	if m.TPM == nil {
		return State{}, nil
	}
	if !m.measured {
		now := time.Now
		if m.Now != nil {
			now = m.Now
		}
		e := LockEvent(clusterID, role, now())
		d, _ := hex.DecodeString(e.Digest)
		if err := m.TPM.Extend(PCR, [sha256.Size]byte(d)); err != nil {
			return State{Present: true, Error: err.Error()}, err
		}
		m.measured = true
		m.log = Log{PCR: PCR, Events: append(m.log.Events, e)}
	}
	data, err := json.MarshalIndent(m.log, "", "  ")
	if err != nil {
		return State{}, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, LogFile), data, 0o600); err != nil {
		return State{Present: true, Measured: true, Error: err.Error()}, fmt.Errorf("measurement log: %w", err)
	}
	return m.Check()
}

// Log is this boot's measurement log.
func (m *Measurer) Log() Log { return Log{PCR: m.log.PCR, Events: slices.Clone(m.log.Events)} }

// Check compares the PCR with this boot's log.
func (m *Measurer) Check() (State, error) {
	if m.TPM == nil {
		return State{}, nil
	}
	st := State{Present: true, Measured: m.measured}
	vals, err := m.TPM.Read(PCR)
	if err != nil {
		st.Error = err.Error()
		return st, err
	}
	st.PCR = vals[0]
	want, err := m.log.Replay()
	if err != nil {
		st.Error = err.Error()
		return st, err
	}
	st.Agrees = bytes.Equal(want, st.PCR)
	if !st.Agrees {
		st.Error = fmt.Sprintf("PCR %d holds %x, but this boot's measurement log replays to %x: something else extended it", PCR, st.PCR, want)
		return st, errors.New(st.Error)
	}
	return st, nil
}

// ReadLog reads a measurement log written by MeasureLock.
func ReadLog(dir string) (Log, error) {
	data, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		return Log{}, err
	}
	var l Log
	return l, json.Unmarshal(data, &l)
}
