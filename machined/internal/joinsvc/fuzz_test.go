package joinsvc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is a Store in memory: the fuzzer calls Use hundreds of thousands of times.
type memStore struct {
	mu   sync.Mutex
	data []byte
}

func (m *memStore) Update(_ context.Context, f func([]byte) ([]byte, error)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := f(m.data)
	if err != nil {
		return err
	}
	m.data = out
	return nil
}

// FuzzUse: whatever a joining node sends as its token, the join service admits it only when it is the
// token that was made, byte for byte, and refuses everything else with a DeniedError (never a panic,
// never another kind of error that the API would report as internal).
func FuzzUse(f *testing.F) {
	ctx := context.Background()
	tokens := NewTokens(&memStore{}, func() time.Time { return time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC) })
	tok, _, err := tokens.Create(ctx, RoleWorker, time.Hour, 1<<31)
	if err != nil {
		f.Fatal(err)
	}
	id, secret, _ := strings.Cut(tok, ".")
	for _, seed := range []string{tok, tok + ".", tok + "x", id + "." + strings.ToUpper(secret), id + ".", "." + secret, id, "", ".", "a.b",
		" " + tok, id + "." + secret[:len(secret)-1]} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		role, err := tokens.Use(ctx, raw)
		if raw == tok {
			if err != nil || role != RoleWorker {
				t.Fatalf("Use(the token) = %q, %v; want %q", role, err, RoleWorker)
			}
			return
		}
		var denied *DeniedError
		if !errors.As(err, &denied) {
			t.Fatalf("Use(%q) = %q, %v; want a DeniedError", raw, role, err)
		}
	})
}
