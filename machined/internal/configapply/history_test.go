package configapply

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-os/cairn/machined/internal/nodelock"
)

func TestHistoryKeepsTheLastConfigs(t *testing.T) {
	h := History{Dir: t.TempDir(), Keep: 3}
	for i, cfg := range []string{"a", "b", "c", "d"} {
		e, err := h.Add(Entry{Client: "admin", Mode: Auto, Time: time.Unix(int64(i), 0)}, []byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if e.Generation != uint32(i+1) || e.SHA256 != nodelock.ConfigSum([]byte(cfg)) {
			t.Errorf("Add(%s) = %+v", cfg, e)
		}
	}
	list, err := h.List()
	if err != nil {
		t.Fatal(err)
	}
	var gens []uint32
	for _, e := range list {
		gens = append(gens, e.Generation)
	}
	if len(gens) != 3 || gens[0] != 4 || gens[2] != 2 {
		t.Fatalf("generations kept = %v, want [4 3 2]", gens)
	}
	if _, err := os.Stat(filepath.Join(h.Dir, "000001.yaml")); !os.IsNotExist(err) {
		t.Errorf("generation 1's config is still on disk: %v", err)
	}
	// Rolling back from d finds c; from c, b.
	for current, want := range map[string]string{"d": "c", "c": "b"} {
		_, cfg, err := h.Previous(nodelock.ConfigSum([]byte(current)))
		if err != nil || string(cfg) != want {
			t.Errorf("Previous(%s) = %q, %v; want %q", current, cfg, err, want)
		}
	}
	if _, _, err := h.Previous(nodelock.ConfigSum([]byte("b"))); err == nil {
		t.Error("Previous of the oldest kept config succeeded")
	}
}

func TestHistoryRefusesATamperedConfig(t *testing.T) {
	h := History{Dir: t.TempDir()}
	if _, err := h.Add(Entry{Client: "init"}, []byte("a")); err != nil {
		t.Fatal(err)
	}
	e, _ := h.Add(Entry{Client: "admin"}, []byte("b"))
	if err := os.WriteFile(filepath.Join(h.Dir, "000001.yaml"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Previous(e.SHA256); err == nil {
		t.Error("Previous returned a config that does not match its recorded hash")
	}
}
