// Package lastknown keeps the provisioner's last known copy of every
// account JWT, in memory and in a local snapshot file, so the URL resolver
// answers nats-server while PostgreSQL is unreachable, also after a restart
// of the provisioner during the outage.
//
// Safety: an entry is replaced only by a JWT of the same account issued at
// the same time or later (its iat), so a stale read can never bring back an
// account JWT from before a revocation; every entry read from the file must
// be an account JWT signed by the operator whose key the provisioner holds,
// so a tampered or foreign file serves nothing. The file holds public,
// signed JWTs only (no seed), and is still written 0600, atomically.
package lastknown

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/atomicfile"
	"github.com/rxc-project/rxc/core/provisioning"
)

// fileVersion is the snapshot file's format.
const fileVersion = 1

type file struct {
	Version       int               `json:"version"`
	Operator      string            `json:"operator"`
	SystemAccount string            `json:"systemAccount"`
	WrittenAt     time.Time         `json:"writtenAt"`
	Accounts      map[string]string `json:"accounts"`
}

type entry struct {
	jwt string
	iat int64
}

// Store is the last known copy. Its methods are safe for concurrent use.
type Store struct {
	path     string
	operator string

	mu       sync.RWMutex
	accounts map[string]entry
	system   string
	dirty    bool
	loaded   time.Time // the snapshot's WrittenAt when loaded from the file
	served   int64     // answers given from the copy while the store failed
}

// Open returns a store for the operator with public key operatorPub, loaded
// from the snapshot file at path when it exists. An empty path keeps the
// copy in memory only. A file of another operator, or one that does not
// decode, is an error: serve refuses to start rather than serve it.
// Entries that are not account JWTs signed by the operator are dropped.
func Open(path, operatorPub string) (*Store, error) {
	s := &Store{path: path, operator: operatorPub, accounts: map[string]entry{}}
	if path == "" {
		return s, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("resolver snapshot: %w", err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("resolver snapshot %s does not decode: %v (delete it; it is rewritten from the database)", path, err)
	}
	if f.Version != fileVersion {
		return nil, fmt.Errorf("resolver snapshot %s has version %d, want %d", path, f.Version, fileVersion)
	}
	if f.Operator != operatorPub {
		return nil, fmt.Errorf("resolver snapshot %s belongs to operator %s, not %s", path, f.Operator, operatorPub)
	}
	for pub, tok := range f.Accounts {
		if iat, err := s.verify(pub, tok); err == nil {
			s.accounts[pub] = entry{jwt: tok, iat: iat}
		}
	}
	if _, ok := s.accounts[f.SystemAccount]; ok {
		s.system = f.SystemAccount
	}
	s.loaded = f.WrittenAt
	return s, nil
}

// verify decodes an account JWT and checks that it is pub's and that the
// operator signed it; it returns the issue time.
func (s *Store) verify(pub, tok string) (int64, error) {
	c, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		return 0, err
	}
	if c.Subject != pub {
		return 0, fmt.Errorf("JWT of %s filed under %s", c.Subject, pub)
	}
	if c.Issuer != s.operator {
		return 0, fmt.Errorf("account %s: issued by %s, not the operator", pub, c.Issuer)
	}
	return c.IssuedAt, nil
}

// Observe records an account JWT read from or written to the database. It
// replaces the entry only when the JWT was issued no earlier than the one
// held (the database is the truth; the iat rule keeps a stale read from
// undoing a newer write, such as a revocation).
func (s *Store) Observe(a provisioning.Account) {
	// The common case, a JWT already held, costs no signature check.
	s.mu.RLock()
	held := s.accounts[a.PubKey].jwt == a.JWT && (a.Kind != provisioning.KindSystem || s.system == a.PubKey)
	s.mu.RUnlock()
	if held {
		return
	}
	iat, err := s.verify(a.PubKey, a.JWT)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.Kind == provisioning.KindSystem && s.system != a.PubKey {
		s.system, s.dirty = a.PubKey, true
	}
	old, ok := s.accounts[a.PubKey]
	if ok && (old.jwt == a.JWT || iat < old.iat) {
		return
	}
	s.accounts[a.PubKey] = entry{jwt: a.JWT, iat: iat}
	s.dirty = true
}

// Get returns the last known JWT of an account and counts the answer as
// served from the copy.
func (s *Store) Get(pubKey string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.accounts[pubKey]
	if ok {
		s.served++
	}
	return e.jwt, ok
}

// System returns the last known system account JWT.
func (s *Store) System() (string, bool) {
	s.mu.RLock()
	sys := s.system
	s.mu.RUnlock()
	if sys == "" {
		return "", false
	}
	return s.Get(sys)
}

// Len is the number of accounts known.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.accounts)
}

// Served is the number of resolver answers given from the copy.
func (s *Store) Served() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.served
}

// LoadedFrom is the write time of the snapshot file the store was loaded
// from; zero when none was.
func (s *Store) LoadedFrom() time.Time { return s.loaded }

// Save writes the snapshot file when something changed since the last
// save: atomically (a crash leaves the old or the new file), mode 0600.
func (s *Store) Save(now time.Time) error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	f := file{Version: fileVersion, Operator: s.operator, SystemAccount: s.system, WrittenAt: now.UTC(), Accounts: make(map[string]string, len(s.accounts))}
	for pub, e := range s.accounts {
		f.Accounts[pub] = e.jwt
	}
	s.dirty = false
	s.mu.Unlock()
	data, err := json.Marshal(f)
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(s.path), 0o700); err == nil {
			err = atomicfile.Write(s.path, data, 0o600)
		}
	}
	if err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return fmt.Errorf("resolver snapshot: %w", err)
	}
	return nil
}

// Keys lists the known accounts, sorted.
func (s *Store) Keys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.accounts))
	for k := range s.accounts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
