package cmd

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cairn-os/cairn/api/machine"
)

// chunks returns a recv function that hands out the chunks, then err (io.EOF when nil).
func chunks(err error, cs ...*machine.DataChunk) func() (*machine.DataChunk, error) {
	return func() (*machine.DataChunk, error) {
		if len(cs) == 0 {
			if err == nil {
				return nil, io.EOF
			}
			return nil, err
		}
		c := cs[0]
		cs = cs[1:]
		return c, nil
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestSaveSnapshot(t *testing.T) {
	tests := []struct {
		name    string
		recv    func() (*machine.DataChunk, error)
		wantErr string // "" : the file is kept
	}{
		{"verified", chunks(nil, &machine.DataChunk{Data: []byte("hello ")}, &machine.DataChunk{Data: []byte("etcd"), Sha256: sha("hello etcd")}), ""},
		{"checksum mismatch", chunks(nil, &machine.DataChunk{Data: []byte("hello ")}, &machine.DataChunk{Data: []byte("etcd"), Sha256: sha("hello world")}), "checksum mismatch"},
		{"no checksum", chunks(nil, &machine.DataChunk{Data: []byte("hello etcd")}), "without its checksum"},
		{"data after the checksum", chunks(nil, &machine.DataChunk{Data: []byte("hello"), Sha256: sha("hello")}, &machine.DataChunk{Data: []byte("!")}), "after the checksum"},
		{"stream broken", chunks(errors.New("Unavailable: etcd went away"), &machine.DataChunk{Data: []byte("hello ")}), "etcd went away"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "etcd.db")
			var progress strings.Builder
			size, sum, err := saveSnapshot(tc.recv, path, &progress)
			entries, _ := os.ReadDir(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("saveSnapshot() = %v, want an error with %q", err, tc.wantErr)
				}
				if len(entries) != 0 {
					t.Errorf("saveSnapshot() failed but left %s behind", entries[0].Name())
				}
				return
			}
			if err != nil {
				t.Fatalf("saveSnapshot() = %v", err)
			}
			b, _ := os.ReadFile(path)
			if string(b) != "hello etcd" || size != 10 || sum != sha("hello etcd") {
				t.Errorf("saveSnapshot() = %d, %s and file %q, want 10 bytes of \"hello etcd\" with its sha256", size, sum, b)
			}
			if len(entries) != 1 {
				t.Errorf("directory holds %d files, want only etcd.db (no .part)", len(entries))
			}
			if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
				t.Errorf("snapshot mode = %v, %v, want 0600: it holds the cluster's secrets", info.Mode().Perm(), err)
			}
		})
	}
}

func TestCheckTargetRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.db")
	os.WriteFile(existing, []byte("precious"), 0o600)
	if err := checkTarget(existing, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("checkTarget(existing) = %v, want a refusal mentioning --force", err)
	}
	if err := checkTarget(existing, true); err != nil {
		t.Errorf("checkTarget(existing, force) = %v, want nil", err)
	}
	if err := checkTarget(filepath.Join(dir, "new.db"), false); err != nil {
		t.Errorf("checkTarget(new) = %v, want nil", err)
	}
}

func TestFormatLine(t *testing.T) {
	ts := time.Date(2026, 5, 4, 3, 2, 1, 987654321, time.Local)
	got := formatLine(&machine.LogLine{Time: timestamppb.New(ts), Service: "kubelet", Line: "started"}, "cp1: ")
	if want := "cp1: 2026-05-04 03:02:01.987 started"; got != want {
		t.Errorf("formatLine() = %q, want %q", got, want)
	}
	if got := formatLine(&machine.LogLine{Line: "no time"}, ""); got != "- no time" {
		t.Errorf("formatLine(no time) = %q, want %q", got, "- no time")
	}
}

func TestPrintEtcdMembers(t *testing.T) {
	var b strings.Builder
	err := printEtcdMembers(&b, "", []*machine.EtcdMember{
		{Id: 0xa1, Name: "cp1", IsLeader: true, PeerUrls: []string{"https://10.5.0.2:2380"}, ClientUrls: []string{"https://10.5.0.2:2379"}},
		{Id: 0xb2, Name: "cp2", PeerUrls: []string{"https://10.5.0.3:2380"}},
		{Id: 0xc3, IsLearner: true, PeerUrls: []string{"https://10.5.0.4:2380"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `ID  NAME  ROLE     PEER URLS              CLIENT URLS
a1  cp1   leader   https://10.5.0.2:2380  https://10.5.0.2:2379
b2  cp2   voter    https://10.5.0.3:2380  -
c3  -     learner  https://10.5.0.4:2380  -
2 voting member(s): a quorum is 2; leader: cp1
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printEtcdMembers() (-want +got):\n%s", diff)
	}
}
