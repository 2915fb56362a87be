package configapply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-os/cairn/machined/internal/atomicfile"
	"github.com/cairn-os/cairn/machined/internal/nodelock"
)

// HistoryDir is the history's directory under STATE.
const HistoryDir = "config-history"

// DefaultKeep is how many configs the history keeps.
const DefaultKeep = 10

// Entry is one config applied to the node. Its body (which holds the cluster's secrets) stays on STATE.
type Entry struct {
	Generation uint32    `json:"generation"`
	Time       time.Time `json:"time"`
	// Client is who applied it: the client certificate's name, or "init"/"join" for the first.
	Client string   `json:"client"`
	Mode   Mode     `json:"mode"`
	SHA256 string   `json:"sha256"`
	Paths  []string `json:"paths,omitempty"`
}

// History keeps the last Keep configs applied to a node, as a pair of files per generation: the config,
// then its entry, which is written last, so an entry always has its config.
type History struct {
	Dir  string
	Keep int
	Now  func() time.Time
}

// Add records cfg as the next generation.
func (h History) Add(e Entry, cfg []byte) (Entry, error) {
	list, err := h.List()
	if err != nil {
		return e, err
	}
	e.Generation = 1
	if len(list) > 0 {
		e.Generation = list[0].Generation + 1
	}
	if e.Time.IsZero() {
		e.Time = h.now()
	}
	e.Time = e.Time.UTC()
	e.SHA256 = nodelock.ConfigSum(cfg)
	base := filepath.Join(h.Dir, fmt.Sprintf("%06d", e.Generation))
	if err := atomicfile.WriteFile(base+".yaml", cfg, 0o600); err != nil {
		return e, fmt.Errorf("config history: %w", err)
	}
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return e, err
	}
	if err := atomicfile.WriteFile(base+".json", data, 0o600); err != nil {
		return e, fmt.Errorf("config history: %w", err)
	}
	keep := h.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	for _, old := range append([]Entry{e}, list...)[min(keep, len(list)+1):] {
		b := filepath.Join(h.Dir, fmt.Sprintf("%06d", old.Generation))
		_ = os.Remove(b + ".json") // the entry first: a config without one is ignored
		_ = os.Remove(b + ".yaml")
	}
	return e, nil
}

// List returns the entries, newest first.
func (h History) List() ([]Entry, error) {
	names, err := os.ReadDir(h.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config history: %w", err)
	}
	var out []Entry
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), ".json") || strings.HasPrefix(n.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(h.Dir, n.Name()))
		if err != nil {
			return nil, fmt.Errorf("config history: %w", err)
		}
		var e Entry
		if err := json.Unmarshal(data, &e); err != nil {
			return nil, fmt.Errorf("config history entry %s is corrupt: %w", n.Name(), err)
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Generation > out[j].Generation })
	return out, nil
}

// Config returns the config of a generation, checked against its entry.
func (h History) Config(e Entry) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(h.Dir, fmt.Sprintf("%06d.yaml", e.Generation)))
	if err != nil {
		return nil, fmt.Errorf("config history: %w", err)
	}
	if nodelock.ConfigSum(data) != e.SHA256 {
		return nil, fmt.Errorf("config history: generation %d does not match its recorded hash", e.Generation)
	}
	return data, nil
}

// Previous returns the config in force before the one whose hash is current: the newest entry older
// than current's newest entry, with another hash.
func (h History) Previous(current string) (Entry, []byte, error) {
	list, err := h.List()
	if err != nil {
		return Entry{}, nil, err
	}
	seen := false
	for _, e := range list {
		if e.SHA256 == current {
			seen = true
			continue
		}
		if seen {
			data, err := h.Config(e)
			return e, data, err
		}
	}
	return Entry{}, nil, &Refusal{Msg: "no earlier config to roll back to: the history holds only the one in force (cairnctl config history)"}
}

func (h History) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}
