// Package lastknown keeps the provisioner's last known copy of every
// account JWT, in memory and in a local snapshot file, so the URL resolver
// answers nats-server while PostgreSQL is unreachable, also after a restart
// of the provisioner during the outage.
//
// Safety: an entry is replaced only by a JWT of the same account issued at
// the same time or later (its iat), so a stale read can never bring back an
// account JWT from before a revocation; every entry read from the file must
// be an account JWT signed by the operator whose key the provisioner holds
// or by one of the signing keys its operator JWT lists, so a tampered or
// foreign file serves nothing. The file holds public,
// signed JWTs only (no seed), and is still written 0600, atomically.
package lastknown

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/sdk/atomicfile"
)

// fileVersion is the snapshot file's format.
const fileVersion = 1

type file struct {
	Version       int               `json:"version"`
	Operator      string            `json:"operator"`
	OperatorJWT   string            `json:"operatorJwt,omitempty"`
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

	// trusted are the keys whose account JWTs the store keeps: the
	// operator's identity key and its signing keys. operatorJWT is the
	// operator JWT they were read from, empty until known.
	trusted     []string
	operatorJWT string

	mu       sync.RWMutex
	accounts map[string]entry
	system   string
	dirty    bool
	loaded   time.Time // the snapshot's WrittenAt when loaded from the file
	served   int64     // answers given from the copy while the store failed
}

// Open returns a store for the provisioner signing accounts with the
// operator key signerPub (the identity key or a signing key), loaded from
// the snapshot file at path when it exists. An empty path keeps the copy in
// memory only. A file that does not decode, whose operator JWT does not
// verify, or (written before operator JWTs were recorded) of another key, is
// an error: serve refuses to start rather than serve it. Until Trust names
// the operator, only JWTs signed by signerPub, or by a key of the operator
// JWT recorded in the file, are kept.
func Open(path, signerPub string) (*Store, error) {
	s := &Store{path: path, operator: signerPub, trusted: []string{signerPub}, accounts: map[string]entry{}}
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
	switch {
	case f.OperatorJWT != "":
		op, trusted, err := operatorKeys(f.OperatorJWT)
		if err != nil || op != f.Operator {
			return nil, fmt.Errorf("resolver snapshot %s: its operator JWT does not verify (delete it; it is rewritten from the database)", path)
		}
		// A key the file's operator JWT does not list yet may have been
		// added since it was written; Trust checks the operator once the
		// database answers.
		s.operator, s.trusted, s.operatorJWT = op, trusted, f.OperatorJWT
	case f.Operator != signerPub:
		return nil, fmt.Errorf("resolver snapshot %s belongs to operator %s, not %s", path, f.Operator, signerPub)
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

// operatorKeys verifies a self-signed operator JWT and returns its identity
// key and every key that may sign its accounts.
func operatorKeys(operatorJWT string) (string, []string, error) {
	oc, err := jwt.DecodeOperatorClaims(operatorJWT)
	if err != nil {
		return "", nil, err
	}
	if oc.Issuer != oc.Subject {
		return "", nil, errors.New("operator JWT is not self-signed")
	}
	return oc.Subject, append([]string{oc.Subject}, oc.SigningKeys...), nil
}

// Trust sets the operator from its JWT (as the database holds it): from
// now on only account JWTs signed by its identity key or one of its signing
// keys are kept, and held ones signed by another key are dropped (a
// signing key removed from the operator). A snapshot of another operator
// is an error.
func (s *Store) Trust(operatorJWT string) error {
	op, trusted, err := operatorKeys(operatorJWT)
	if err != nil {
		return fmt.Errorf("resolver snapshot: operator JWT: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.operatorJWT != "" && s.operator != op {
		return fmt.Errorf("resolver snapshot %s belongs to operator %s, not %s", s.path, s.operator, op)
	}
	if s.operatorJWT == "" && !slices.Contains(trusted, s.operator) {
		return fmt.Errorf("resolver snapshot %s belongs to operator key %s, which operator %s does not list", s.path, s.operator, op)
	}
	if s.operatorJWT != operatorJWT {
		s.dirty = true
	}
	s.operator, s.trusted, s.operatorJWT = op, trusted, operatorJWT
	for pub, e := range s.accounts {
		if _, err := s.verify(pub, e.jwt); err != nil {
			delete(s.accounts, pub)
			s.dirty = true
		}
	}
	if _, ok := s.accounts[s.system]; !ok {
		s.system = ""
	}
	return nil
}

// verify decodes an account JWT and checks that it is pub's and that the
// operator or one of its signing keys signed it; it returns the issue time.
// Callers hold s.mu or own s alone.
func (s *Store) verify(pub, tok string) (int64, error) { return verify(s.trusted, pub, tok) }

// verify is Store.verify with the keys given. It reads only the claims it
// checks (subject, issuer, issue time), not the account's: a tenant's JWT
// carries up to its bound (ACCOUNT_JWT_MAX_BYTES) of revocations, and
// Observe sees every JWT a revocation signs. The signature covers the whole
// JWT all the same. The subject must be pub and pub an account key: the
// operator's keys sign no other JWT about an account key than the
// account's own.
func verify(trusted []string, pub, tok string) (int64, error) {
	if !nkeys.IsValidPublicAccountKey(pub) {
		return 0, fmt.Errorf("%q is not an account key", pub)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return 0, errors.New("not a JWT: want three parts")
	}
	header, claims, sig := parts[0], parts[1], parts[2]
	var h struct {
		Type      string `json:"typ"`
		Algorithm string `json:"alg"`
	}
	data, err := base64.RawURLEncoding.DecodeString(header)
	if err == nil {
		err = json.Unmarshal(data, &h)
	}
	if err != nil {
		return 0, fmt.Errorf("JWT header: %w", err)
	}
	if !strings.EqualFold(h.Type, jwt.TokenTypeJwt) || h.Algorithm != jwt.AlgorithmNkey {
		return 0, fmt.Errorf("JWT header: type %q, algorithm %q", h.Type, h.Algorithm)
	}
	// The top of the claims first (the library writes them there), all
	// of them only when that does not hold what verify reads.
	c, err := jwtTop{}, errors.New("no claims")
	if len(claims) > claimsHead {
		if data, err = base64.RawURLEncoding.DecodeString(claims[:claimsHead]); err == nil {
			c, err = topClaims(data)
		}
	}
	if err != nil {
		if data, err = base64.RawURLEncoding.DecodeString(claims); err != nil {
			return 0, fmt.Errorf("JWT claims: %w", err)
		}
		if c, err = topClaims(data); err != nil {
			return 0, fmt.Errorf("JWT claims: %w", err)
		}
	}
	if c.Subject != pub {
		return 0, fmt.Errorf("JWT of %s filed under %s", c.Subject, pub)
	}
	if !slices.Contains(trusted, c.Issuer) {
		return 0, fmt.Errorf("account %s: issued by %s, not a key of the operator", pub, c.Issuer)
	}
	signature, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return 0, fmt.Errorf("JWT signature: %w", err)
	}
	issuer, err := nkeys.FromPublicKey(c.Issuer)
	if err != nil {
		return 0, fmt.Errorf("account %s: issuer: %w", pub, err)
	}
	// A version 2 JWT signs its header and claims (as jwt.Decode checks).
	if err := issuer.Verify([]byte(tok[:len(header)+1+len(claims)]), signature); err != nil {
		return 0, fmt.Errorf("account %s: signature: %w", pub, err)
	}
	return c.IssuedAt, nil
}

// claimsHead is how much of a JWT's encoded claims verify decodes first (a
// multiple of 4 base64 characters): the subject, issuer and issue time
// come within the first few hundred bytes.
const claimsHead = 1024

// jwtTop is what verify reads of a JWT's claims.
type jwtTop struct {
	Subject  string `json:"sub"`
	Issuer   string `json:"iss"`
	IssuedAt int64  `json:"iat"`
}

// topClaims reads the subject, issuer and issue time from the top level
// of a JWT's claims and stops there: the library writes them before the
// "nats" object that holds the account (read past only when they come
// after it).
func topClaims(data []byte) (jwtTop, error) {
	var c jwtTop
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return c, errors.New("claims are not an object")
	}
	var have [3]bool
	for !(have[0] && have[1] && have[2]) {
		if !dec.More() {
			break
		}
		tok, err := dec.Token()
		if err != nil {
			return c, err
		}
		var dst any
		switch tok {
		case "sub":
			dst, have[0] = &c.Subject, true
		case "iss":
			dst, have[1] = &c.Issuer, true
		case "iat":
			dst, have[2] = &c.IssuedAt, true
		default:
			dst = &json.RawMessage{}
		}
		if err := dec.Decode(dst); err != nil {
			return c, err
		}
	}
	if !(have[0] && have[1] && have[2]) {
		return c, errors.New("claims lack a subject, an issuer or an issue time")
	}
	// A value that ran to the end of the data may have been cut (a
	// number at the end of a head reads as a smaller one): only the whole
	// claims may end there.
	if dec.InputOffset() >= int64(len(data)) {
		return c, errors.New("claims end within what verify reads")
	}
	return c, nil
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
	s.mu.RLock()
	trusted := s.trusted
	s.mu.RUnlock()
	iat, err := verify(trusted, a.PubKey, a.JWT)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(trusted, s.trusted) {
		return // Trust changed the keys meanwhile; the next read observes again
	}
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
	f := file{Version: fileVersion, Operator: s.operator, OperatorJWT: s.operatorJWT, SystemAccount: s.system, WrittenAt: now.UTC(), Accounts: make(map[string]string, len(s.accounts))}
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
