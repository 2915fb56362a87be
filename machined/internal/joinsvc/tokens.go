package joinsvc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-os/cairn/machined/internal/atomicfile"
)

// Roles a token admits.
const (
	RoleWorker       = "worker"
	RoleControlPlane = "controlplane"
)

// Token limits.
const (
	DefaultTTL = time.Hour
	MaxTTL     = 365 * 24 * time.Hour
)

// TokensFile holds the join tokens under STATE where the cluster has no Kubernetes to keep them in (a
// sandbox node without a payload); see FileStore.
const TokensFile = "join-tokens.json"

// token is a stored join token. Only the secret's hash is kept: a leaked STATE copy lets nobody join.
type token struct {
	ID         string    `json:"id"`
	SecretHash string    `json:"secretHash"`
	Role       string    `json:"role"`
	Expires    time.Time `json:"expires"`
	UsesLeft   uint32    `json:"usesLeft"`
}

// Store keeps the join tokens' records (JSON). Update reads them (nil when there are none), calls f and
// writes what f returns, atomically with respect to every other Update of the same store: on every
// control plane, for the cluster's store. f may be called more than once (a lost race is retried) and
// writes nothing when it fails.
type Store interface {
	Update(ctx context.Context, f func(data []byte) ([]byte, error)) error
}

// Tokens are the cluster's join tokens. Every change is a compare-and-swap of the whole set, so a
// single-use token admits exactly one node however many ask at once, at however many control planes.
type Tokens struct {
	store Store
	now   func() time.Time
}

// NewTokens keeps tokens in store.
func NewTokens(store Store, now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{store: store, now: now}
}

// Info describes a token without its secret.
type Info struct {
	ID       string
	Role     string
	Expires  time.Time
	UsesLeft uint32
}

// update runs f over the decoded live tokens and stores what it returns.
func (t *Tokens) update(ctx context.Context, f func([]token) ([]token, error)) error {
	return t.store.Update(ctx, func(data []byte) ([]byte, error) {
		var all []token
		if len(data) > 0 {
			if err := json.Unmarshal(data, &all); err != nil {
				return nil, fmt.Errorf("the join tokens' records are corrupt: %w", err)
			}
		}
		out, err := f(t.live(all))
		if err != nil {
			return nil, err
		}
		return json.MarshalIndent(out, "", "  ")
	})
}

// Create makes a token for role, valid for ttl (0: DefaultTTL), usable uses times (0: once). It returns
// ID.SECRET, the only time the secret exists outside the caller.
func (t *Tokens) Create(ctx context.Context, role string, ttl time.Duration, uses uint32) (string, time.Time, error) {
	if role != RoleWorker && role != RoleControlPlane {
		return "", time.Time{}, &DeniedError{Reason: fmt.Sprintf("role %q: want %s or %s", role, RoleWorker, RoleControlPlane), invalid: true}
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < 0 || ttl > MaxTTL {
		return "", time.Time{}, &DeniedError{Reason: fmt.Sprintf("ttl %s: want up to %s", ttl, MaxTTL), invalid: true}
	}
	if uses == 0 {
		uses = 1
	}
	id, secret := randomString(6), randomString(16)
	exp := t.now().Add(ttl).UTC().Truncate(time.Second)
	err := t.update(ctx, func(all []token) ([]token, error) {
		return append(all, token{ID: id, SecretHash: hash(secret), Role: role, Expires: exp, UsesLeft: uses}), nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	return id + "." + secret, exp, nil
}

// DeniedError says why a join was refused (its token, or its attestation); the API answers PermissionDenied
// (InvalidArgument for a malformed request).
type DeniedError struct {
	Reason  string
	invalid bool
}

func (e *DeniedError) Error() string { return "join refused: " + e.Reason }

// Invalid reports whether the request itself was malformed (rather than the token refused).
func (e *DeniedError) Invalid() bool { return e.invalid }

// Use checks a token and spends one use of it, returning the role it admits.
func (t *Tokens) Use(ctx context.Context, raw string) (string, error) {
	id, secret, ok := strings.Cut(raw, ".")
	if !ok || id == "" || secret == "" {
		return "", &DeniedError{Reason: "malformed (want ID.SECRET)"}
	}
	var role string
	err := t.update(ctx, func(all []token) ([]token, error) {
		for i, tk := range all {
			if tk.ID != id {
				continue
			}
			if subtle.ConstantTimeCompare([]byte(tk.SecretHash), []byte(hash(secret))) != 1 {
				return nil, &DeniedError{Reason: "wrong secret"}
			}
			if tk.UsesLeft == 0 {
				return nil, &DeniedError{Reason: "used up"}
			}
			all[i].UsesLeft--
			role = tk.Role
			return all, nil
		}
		return nil, &DeniedError{Reason: "unknown token (expired, revoked, made by another cluster, or never)"}
	})
	return role, err
}

// Refund gives back the use Use spent, for a request refused after its token was checked (etcd not ready
// for another member, a malformed request): a token that admitted nobody is not spent.
func (t *Tokens) Refund(ctx context.Context, raw string) error {
	id, _, _ := strings.Cut(raw, ".")
	return t.update(ctx, func(all []token) ([]token, error) {
		for i := range all {
			if all[i].ID == id {
				all[i].UsesLeft++
			}
		}
		return all, nil // expired meanwhile: nothing to give back
	})
}

// List describes the live tokens, soonest to expire first.
func (t *Tokens) List(ctx context.Context) ([]Info, error) {
	var out []Info
	err := t.update(ctx, func(all []token) ([]token, error) {
		out = out[:0]
		for _, tk := range all {
			out = append(out, Info{ID: tk.ID, Role: tk.Role, Expires: tk.Expires, UsesLeft: tk.UsesLeft})
		}
		return all, nil
	})
	slices.SortFunc(out, func(a, b Info) int { return a.Expires.Compare(b.Expires) })
	return out, err
}

// Revoke deletes a token (given as ID or ID.SECRET) on every control plane at once. An unknown ID is an
// error: a typo must not look like a revoked token.
func (t *Tokens) Revoke(ctx context.Context, raw string) error {
	id, _, _ := strings.Cut(raw, ".")
	return t.update(ctx, func(all []token) ([]token, error) {
		for i := range all {
			if all[i].ID == id {
				return slices.Delete(all, i, i+1), nil
			}
		}
		return nil, &DeniedError{Reason: fmt.Sprintf("no live token %q (expired, revoked already, or never made)", id), invalid: true}
	})
}

// live drops tokens that have expired. A used-up token stays until then, so a use can be refunded.
func (t *Tokens) live(all []token) []token {
	var out []token
	for _, tk := range all {
		if t.now().Before(tk.Expires) {
			out = append(out, tk)
		}
	}
	return out
}

// FileStore keeps the tokens in the file path() names (read at each use: STATE moves from RAM to its
// disk). It serves a node with no Kubernetes to keep them in; its tokens are honoured by that node alone.
func FileStore(path func() string) Store { return &fileStore{path: path} }

type fileStore struct {
	mu   sync.Mutex
	path func() string
}

func (s *fileStore) Update(_ context.Context, f func([]byte) ([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := os.ReadFile(s.path())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read join tokens: %w", err)
	}
	out, err := f(data)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path()), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(s.path(), out, 0o600)
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func randomString(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, n)
	buf := make([]byte, 1)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			panic(err)
		}
		if buf[0] < 252 { // 252 = 7×36: no modulo bias
			out = append(out, alphabet[int(buf[0])%len(alphabet)])
		}
	}
	return string(out)
}
