package verity

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cairn-os/cairn/api/payload"
)

type fakeRunner struct {
	calls []string
	fail  string // a call that starts with this fails
}

func (r *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	c := strings.Join(append([]string{name}, args...), " ")
	r.calls = append(r.calls, c)
	if r.fail != "" && strings.HasPrefix(c, r.fail) {
		return []byte("Device cairn-payload already exists."), errors.New("exit status 1")
	}
	return nil, nil
}

// errReader fails its reads as the kernel fails the read of a block that does not match its tree.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, syscall.EIO }
func (errReader) Close() error             { return nil }

func TestOpenImage(t *testing.T) {
	v := payload.Verity{RootHash: strings.Repeat("ab", 32), DataSize: 81920}
	open := "veritysetup open /dev/vdb cairn-payload /dev/vdb " + v.RootHash + " --hash-offset=81920"
	for _, tc := range []struct {
		name     string
		stale    bool   // a device of that name is there already
		firstErr bool   // its first block cannot be read
		fail     string // the veritysetup call that fails
		want     []string
		err      string
		mismatch bool
	}{
		{name: "opened and its first block read", want: []string{open}},
		{name: "a device left by an earlier search is closed first", stale: true,
			want: []string{"veritysetup close cairn-payload", open}},
		{name: "a first block dm-verity refuses: closed again", firstErr: true,
			want: []string{open, "veritysetup close cairn-payload"}, err: "dm-verity refused its first block (root hash " + v.RootHash + "): input/output error", mismatch: true},
		{name: "veritysetup fails", fail: "veritysetup open",
			want: []string{open}, err: "dm-verity over /dev/vdb: exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.stale {
				if err := os.WriteFile(filepath.Join(dir, "cairn-payload"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := &fakeRunner{fail: tc.fail}
			prepared := false
			d := Devices{Runner: r, MapperDir: dir,
				Prepare: func(context.Context) error { prepared = true; return nil },
				Open: func(p string) (io.ReadCloser, error) {
					if p != filepath.Join(dir, "cairn-payload") {
						t.Errorf("read the first block of %s, want the opened device", p)
					}
					if tc.firstErr {
						return errReader{}, nil
					}
					return io.NopCloser(bytes.NewReader(make([]byte, payload.VerityBlock))), nil
				}}
			got, err := d.OpenImage(t.Context(), "/dev/vdb", "cairn-payload", v)
			if tc.err == "" && (err != nil || got != filepath.Join(dir, "cairn-payload")) {
				t.Errorf("OpenImage() = %q, %v; want the device's path", got, err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("OpenImage() = %v, want an error containing %q", err, tc.err)
			}
			if errors.Is(err, ErrMismatch) != tc.mismatch {
				t.Errorf("OpenImage() = %v: errors.Is(ErrMismatch) = %v, want %v", err, !tc.mismatch, tc.mismatch)
			}
			if !prepared {
				t.Error("Prepare was not called")
			}
			if diff := cmp.Diff(tc.want, r.calls); diff != "" {
				t.Errorf("veritysetup calls (-want +got):\n%s", diff)
			}
		})
	}
}
