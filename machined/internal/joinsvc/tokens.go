package joinsvc

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// TokensFile holds the join tokens under STATE: a node that reboots keeps honouring the tokens it issued.
const TokensFile = "join-tokens.json"

// token is a stored join token. Only the secret's hash is kept: a leaked STATE copy lets nobody join.
type token struct {
	ID         string    `json:"id"`
	SecretHash string    `json:"secretHash"`
	Role       string    `json:"role"`
	Expires    time.Time `json:"expires"`
	UsesLeft   uint32    `json:"usesLeft"`
}

// Tokens is the node's store of join tokens. Use is a compare-and-swap under one lock: a single-use
// token admits exactly one node however many ask at once.
type Tokens struct {
	mu   sync.Mutex
	path func() string // STATE moves from RAM to disk; read the place at each use
	now  func() time.Time
}

// NewTokens keeps tokens in the file path() names.
func NewTokens(path func() string, now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{path: path, now: now}
}

// Create makes a token for role, valid for ttl (0: DefaultTTL), usable uses times (0: once). It returns
// ID.SECRET, the only time the secret exists outside the caller.
func (t *Tokens) Create(role string, ttl time.Duration, uses uint32) (string, time.Time, error) {
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
	t.mu.Lock()
	defer t.mu.Unlock()
	all, err := t.load()
	if err != nil {
		return "", time.Time{}, err
	}
	all = append(t.live(all), token{ID: id, SecretHash: hash(secret), Role: role, Expires: exp, UsesLeft: uses})
	if err := t.save(all); err != nil {
		return "", time.Time{}, err
	}
	return id + "." + secret, exp, nil
}

// DeniedError says why a token was refused; the API answers PermissionDenied (InvalidArgument for a bad
// request to create one).
type DeniedError struct {
	Reason  string
	invalid bool
}

func (e *DeniedError) Error() string { return "join token refused: " + e.Reason }

// Invalid reports whether the request itself was malformed (rather than the token refused).
func (e *DeniedError) Invalid() bool { return e.invalid }

// Use checks a token and spends one use of it, returning the role it admits.
func (t *Tokens) Use(raw string) (string, error) {
	id, secret, ok := strings.Cut(raw, ".")
	if !ok || id == "" || secret == "" {
		return "", &DeniedError{Reason: "malformed (want ID.SECRET)"}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	all, err := t.load()
	if err != nil {
		return "", err
	}
	for i, tk := range all {
		if tk.ID != id {
			continue
		}
		if subtle.ConstantTimeCompare([]byte(tk.SecretHash), []byte(hash(secret))) != 1 {
			return "", &DeniedError{Reason: "wrong secret"}
		}
		if !t.now().Before(tk.Expires) {
			return "", &DeniedError{Reason: "expired at " + tk.Expires.Format(time.RFC3339)}
		}
		if tk.UsesLeft == 0 {
			return "", &DeniedError{Reason: "used up"}
		}
		all[i].UsesLeft--
		if err := t.save(t.live(all)); err != nil {
			return "", err
		}
		return tk.Role, nil
	}
	return "", &DeniedError{Reason: "unknown token (made by another cluster, or never)"}
}

// Refund gives back the use Use spent, for a request refused after its token was checked (etcd not ready
// for another member, a malformed request): a token that admitted nobody is not spent.
func (t *Tokens) Refund(raw string) error {
	id, _, _ := strings.Cut(raw, ".")
	t.mu.Lock()
	defer t.mu.Unlock()
	all, err := t.load()
	if err != nil {
		return err
	}
	for i := range all {
		if all[i].ID == id {
			all[i].UsesLeft++
			return t.save(t.live(all))
		}
	}
	return nil // expired meanwhile: nothing to give back
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

func (t *Tokens) load() ([]token, error) {
	data, err := os.ReadFile(t.path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read join tokens: %w", err)
	}
	var all []token
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("join tokens %s are corrupt: %w", t.path(), err)
	}
	return all, nil
}

func (t *Tokens) save(all []token) error {
	data, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.path()), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(t.path(), data, 0o600)
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
