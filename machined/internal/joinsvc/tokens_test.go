package joinsvc

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func store(t *testing.T, now *time.Time) *Tokens {
	p := filepath.Join(t.TempDir(), TokensFile)
	return NewTokens(FileStore(func() string { return p }), func() time.Time { return *now })
}

func TestTokenLifecycle(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := store(t, &now)
	tok, exp, err := s.Create(context.Background(), RoleWorker, time.Hour, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(now.Add(time.Hour)) {
		t.Errorf("expires %s, want %s", exp, now.Add(time.Hour))
	}
	id, _, _ := strings.Cut(tok, ".")
	tests := []struct {
		name    string
		token   string
		advance time.Duration
		want    string // substring of the refusal, "" for success
	}{
		{"first use", tok, 0, ""},
		{"wrong secret", id + ".0000000000000000", 0, "wrong secret"},
		{"malformed", "nonsense", 0, "malformed"},
		{"other cluster", "abcdef.0123456789abcdef", 0, "unknown token"},
		{"second use", tok, 0, ""},
		{"used up", tok, 0, "used up"}, // kept until it expires, so a use can be refunded
	}
	for _, tc := range tests {
		now = now.Add(tc.advance)
		role, err := s.Use(context.Background(), tc.token)
		if tc.want == "" {
			if err != nil || role != RoleWorker {
				t.Errorf("%s: Use = %q, %v", tc.name, role, err)
			}
			continue
		}
		var de *DeniedError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Use = %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
}

func TestTokenExpires(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := store(t, &now)
	tok, _, _ := s.Create(context.Background(), RoleControlPlane, time.Minute, 5)
	now = now.Add(61 * time.Second)
	if _, err := s.Use(context.Background(), tok); err == nil {
		t.Fatal("an expired token was accepted")
	}
}

func TestCreateRefusesBadRequests(t *testing.T) {
	now := time.Now()
	s := store(t, &now)
	for _, tc := range []struct {
		role string
		ttl  time.Duration
	}{{"admin", 0}, {RoleWorker, -time.Second}, {RoleWorker, 2 * MaxTTL}} {
		var de *DeniedError
		if _, _, err := s.Create(context.Background(), tc.role, tc.ttl, 1); !errors.As(err, &de) || !de.Invalid() {
			t.Errorf("Create(%q, %s) = %v, want an invalid request", tc.role, tc.ttl, err)
		}
	}
}

// A single-use token handed to many nodes at once admits exactly one.
func TestSingleUseTokenHasOneWinner(t *testing.T) {
	now := time.Now()
	s := store(t, &now)
	for round := 0; round < 50; round++ {
		tok, _, err := s.Create(context.Background(), RoleWorker, time.Hour, 1)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Use(context.Background(), tok); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("round %d: %d nodes joined with one single-use token", round, wins)
		}
	}
}
