package slots

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-os/cairn/api/payload"
	"github.com/cairn-os/cairn/api/upgrade"
)

func newESP(t *testing.T, names ...string) osFS {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "EFI", "Linux"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(root, "EFI", "Linux", n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return osFS{root}
}

func names(t *testing.T, fsys fileSystem) []string {
	t.Helper()
	es, err := Entries(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.FileName())
	}
	return out
}

func TestEntriesBootOrder(t *testing.T) {
	for _, tc := range []struct {
		files []string
		want  string // the entry that boots next
	}{
		{[]string{"cairn-1-a.efi"}, "cairn-1-a.efi"},
		{[]string{"cairn-1-a.efi", "cairn-2-b+1.efi"}, "cairn-2-b+1.efi"},
		// The trial boot used its try and did not confirm: back to A.
		{[]string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, "cairn-1-a.efi"},
		{[]string{"cairn-9-a.efi", "cairn-10-b.efi"}, "cairn-10-b.efi"},
		{[]string{"cairn-3-a.efi", "cairn-2-b.efi", "notes.txt"}, "cairn-3-a.efi"},
	} {
		got := names(t, newESP(t, tc.files...))
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("Entries(%v) = %v, want %s first", tc.files, got, tc.want)
		}
	}
}

func TestUpgradeConfirmRollback(t *testing.T) {
	esp := newESP(t, "cairn-1-a.efi")
	next, err := Stage(esp, payload.SlotB, strings.NewReader("new image"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := next.FileName(), "cairn-2-b+1.efi"; got != want {
		t.Errorf("Stage = %s, want %s", got, want)
	}
	if got := names(t, esp); got[0] != "cairn-2-b+1.efi" {
		t.Errorf("after Stage the next boot is %s, want the new entry", got[0])
	}
	// systemd-boot counts the try before it boots the entry.
	if err := esp.Rename(entryPath(next), upgrade.EntriesDir+"/cairn-2-b+0-1.efi"); err != nil {
		t.Fatal(err)
	}
	good, err := MarkGood(esp, upgrade.Entry{Gen: 2, Slot: payload.SlotB})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, esp); got[0] != "cairn-2-b.efi" || good.FileName() != "cairn-2-b.efi" {
		t.Errorf("after MarkGood: entries %v, marked %s; want cairn-2-b.efi first", got, good.FileName())
	}
	if _, err := Rollback(esp, payload.SlotB); err != nil {
		t.Fatal(err)
	}
	if got := names(t, esp); got[0] != "cairn-3-a.efi" {
		t.Errorf("after Rollback the next boot is %s, want cairn-3-a.efi", got[0])
	}
	b, err := os.ReadFile(esp.path(upgrade.EntriesDir + "/cairn-3-a.efi"))
	if err != nil || string(b) != "cairn-1-a.efi" {
		t.Errorf("rolled-back entry holds %q, %v; want slot A's original image", b, err)
	}
}

// A rollback to an entry that never confirmed a boot (one systemd-boot gave up on) is refused.
func TestRollbackRefusesUnconfirmed(t *testing.T) {
	esp := newESP(t, "cairn-1-a.efi", "cairn-2-b+0-1.efi")
	if _, err := Rollback(esp, payload.SlotA); err == nil || !strings.Contains(err.Error(), "never confirmed") {
		t.Errorf("Rollback = %v, want a refusal", err)
	}
	if got := names(t, esp); got[0] != "cairn-1-a.efi" {
		t.Errorf("a refused rollback changed the boot order: %v", got)
	}
}

// A bundle whose image fails its check at the end leaves the entries as they were.
func TestStageBadImage(t *testing.T) {
	esp := newESP(t, "cairn-1-a.efi", "cairn-2-b.efi")
	bad := io.MultiReader(strings.NewReader("half"), errReader{errors.New("SHA-256 mismatch")})
	if _, err := Stage(esp, payload.SlotA, bad); err == nil {
		t.Fatal("Stage of a bad image succeeded")
	}
	if got := names(t, esp); len(got) != 2 || got[0] != "cairn-2-b.efi" {
		t.Errorf("entries after a failed Stage = %v, want them unchanged", got)
	}
	if _, err := os.Stat(esp.path(stagingName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the staging file is left behind: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cutFS stops working after steps calls, as if the power went: every later call fails.
type cutFS struct {
	osFS
	steps int
}

var errPowerCut = errors.New("power cut")

func (c *cutFS) step() error {
	if c.steps <= 0 {
		return errPowerCut
	}
	c.steps--
	return nil
}

func (c *cutFS) Create(name string) (io.WriteCloser, error) {
	if err := c.step(); err != nil {
		return nil, err
	}
	w, err := c.osFS.Create(name)
	if err != nil {
		return nil, err
	}
	return cutWriter{w, c}, nil
}
func (c *cutFS) Rename(from, to string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.osFS.Rename(from, to)
}
func (c *cutFS) Remove(name string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.osFS.Remove(name)
}
func (c *cutFS) SyncDir(dir string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.osFS.SyncDir(dir)
}

type cutWriter struct {
	io.WriteCloser
	c *cutFS
}

func (w cutWriter) Write(b []byte) (int, error) {
	if err := w.c.step(); err != nil {
		return 0, err
	}
	return w.WriteCloser.Write(b)
}

func (w cutWriter) Close() error {
	w.WriteCloser.Close()
	return w.c.step()
}

// A power cut at every step of every change leaves an ESP that boots the old entry or the new one, with
// the image each name promises.
func TestPowerCutAtEveryStep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    []string
		change   func(fileSystem) error
		old, new string
	}{
		{"stage", []string{"cairn-1-a.efi", "cairn-2-b.efi"}, func(f fileSystem) error {
			_, err := Stage(f, payload.SlotA, strings.NewReader("image 3"))
			return err
		}, "cairn-2-b.efi", "cairn-3-a+1.efi"},
		{"mark-good", []string{"cairn-1-a.efi", "cairn-2-b+0-1.efi"}, func(f fileSystem) error {
			_, err := MarkGood(f, upgrade.Entry{Gen: 2, Slot: payload.SlotB})
			return err
		}, "cairn-1-a.efi", "cairn-2-b.efi"},
		{"rollback", []string{"cairn-1-a.efi", "cairn-2-b.efi"}, func(f fileSystem) error {
			_, err := Rollback(f, payload.SlotB)
			return err
		}, "cairn-2-b.efi", "cairn-3-a.efi"},
	} {
		for steps := 0; ; steps++ {
			esp := newESP(t, tc.files...)
			err := tc.change(&cutFS{esp, steps})
			got := names(t, esp)[0]
			if got != tc.old && got != tc.new {
				t.Errorf("%s cut after %d steps: %s boots next, want %s or %s", tc.name, steps, got, tc.old, tc.new)
			}
			if err == nil {
				if got != tc.new {
					t.Errorf("%s finished: %s boots next, want %s", tc.name, got, tc.new)
				}
				break
			}
			if steps > 20 {
				t.Fatalf("%s never finished: %v", tc.name, err)
			}
		}
	}
}

func TestBooted(t *testing.T) {
	dir := t.TempDir()
	var b []byte
	b = append(b, 6, 0, 0, 0)
	for _, c := range "cairn-2-b.efi" {
		b = append(b, byte(c), 0)
	}
	b = append(b, 0, 0)
	if err := os.WriteFile(filepath.Join(dir, "LoaderEntrySelected-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Booted(dir)
	if err != nil || e.Slot != payload.SlotB || e.Gen != 2 {
		t.Errorf("Booted = %+v, %v; want gen 2 slot B", e, err)
	}
	if _, err := Booted(t.TempDir()); err == nil {
		t.Error("Booted without the variable succeeded")
	}
}
