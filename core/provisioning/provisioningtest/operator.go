package provisioningtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/rxc-project/rxc/core/provisioning"
)

// Authority is a provisioning.OperatorAuthority: keys count up ("O…" for
// operator keys, signing keys included), a seed is "seed:" and its public
// key, the operator JWT is its spec in JSON, and the accounts are signed by
// the Signer fake, which records the signing seed and control account it
// was asked for.
type Authority struct {
	Signer Signer
	mu     sync.Mutex
	n      int
	// SignErr, when set, fails SignOperator.
	SignErr error
	// Signers lists the (signing seed, control account) pairs AccountSigner
	// was called with, in order.
	Signers [][2]string
}

var _ provisioning.OperatorAuthority = (*Authority)(nil)

// operatorJWT is what the fake operator JWT carries.
type operatorJWT struct {
	Identity string                   `json:"identity"`
	Spec     provisioning.OperatorJWT `json:"spec"`
}

func (a *Authority) key() (string, []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	pub := fmt.Sprintf("O%055d", a.n)
	return pub, []byte("seed:" + pub)
}

// NewOperatorKey implements provisioning.OperatorAuthority.
func (a *Authority) NewOperatorKey() (string, []byte, error) {
	pub, seed := a.key()
	return pub, seed, nil
}

// NewSigningKey implements provisioning.OperatorAuthority.
func (a *Authority) NewSigningKey() (string, []byte, error) {
	pub, seed := a.key()
	return pub, seed, nil
}

// PublicKeyFromSeed implements provisioning.OperatorAuthority.
func (a *Authority) PublicKeyFromSeed(seed []byte) (string, error) {
	pub, ok := strings.CutPrefix(string(seed), "seed:")
	if !ok {
		return "", errors.New("not a seed of the fake authority")
	}
	return pub, nil
}

// HoldsKey implements provisioning.OperatorAuthority.
func (a *Authority) HoldsKey(op provisioning.Operator, pub string) error {
	if pub == op.PubKey {
		return nil
	}
	o, err := ParseOperatorJWT(op.JWT)
	if err != nil {
		return err
	}
	if slices.Contains(o.SigningKeys, pub) {
		return nil
	}
	return fmt.Errorf("it holds key %s but the store's operator is %s", pub, op.PubKey)
}

// AccountSigner implements provisioning.OperatorAuthority. The accounts
// the signer signs from then on name the signing seed's key as their
// issuer (AccountIssuer).
func (a *Authority) AccountSigner(signingSeed []byte, controlAccount string) (provisioning.Signer, error) {
	a.mu.Lock()
	a.Signers = append(a.Signers, [2]string{string(signingSeed), controlAccount})
	a.mu.Unlock()
	pub, err := a.PublicKeyFromSeed(signingSeed)
	if err != nil {
		return nil, err
	}
	a.Signer.setIssuer(pub)
	return &a.Signer, nil
}

// ReadOperator implements provisioning.OperatorAuthority.
func (a *Authority) ReadOperator(tok string) (string, provisioning.OperatorJWT, error) {
	var o operatorJWT
	raw, ok := strings.CutPrefix(tok, "fakeoperator.")
	if !ok || json.Unmarshal([]byte(raw), &o) != nil {
		return "", provisioning.OperatorJWT{}, errors.New("not an operator JWT of the fake authority")
	}
	return o.Identity, o.Spec, nil
}

// AccountIssuer implements provisioning.OperatorAuthority: the key whose
// seed AccountSigner was last given when the account was signed.
func (a *Authority) AccountIssuer(accountJWT string) (string, error) {
	c, err := decode(accountJWT)
	if err != nil || c.Type != "account" {
		return "", errors.New("not an account JWT of the fake signer")
	}
	return c.Issuer, nil
}

// CheckResolverURL implements provisioning.OperatorAuthority: http(s) URLs
// ending in "/".
func (a *Authority) CheckResolverURL(url string) error {
	if (strings.HasPrefix(url, "http://") || strings.HasPrefix(url, "https://")) && strings.HasSuffix(url, "/") {
		return nil
	}
	return fmt.Errorf("resolver URL %q: not http(s) ending in /", url)
}

// SignOperator implements provisioning.OperatorAuthority.
func (a *Authority) SignOperator(identitySeed []byte, spec provisioning.OperatorJWT) (string, error) {
	a.mu.Lock()
	err := a.SignErr
	a.mu.Unlock()
	if err != nil {
		return "", err
	}
	pub, err := a.PublicKeyFromSeed(identitySeed)
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(operatorJWT{Identity: pub, Spec: spec})
	return "fakeoperator." + string(b), nil
}

// ParseOperatorJWT returns what an operator JWT of the fake says.
func ParseOperatorJWT(tok string) (provisioning.OperatorJWT, error) {
	_, spec, err := (*Authority)(nil).ReadOperator(tok)
	return spec, err
}

// ServerConfig implements provisioning.OperatorAuthority.
func (a *Authority) ServerConfig(op provisioning.Operator, resolverURL string) []byte {
	return []byte(fmt.Sprintf("operator=%s system=%s resolver=%s\n", op.JWT, op.SystemAccount, resolverURL))
}

// Files is a provisioning.SeedFiles in memory. Staged files are named
// after their target with a counter.
type Files struct {
	mu     sync.Mutex
	files  map[string][]byte
	staged int
	// PlaceErr, ConfigErr and ExistsErr, when set, fail PlaceSeed,
	// WriteConfig and Exists.
	PlaceErr, ConfigErr, ExistsErr error
}

var _ provisioning.SeedFiles = (*Files)(nil)

// Put sets a file's content.
func (f *Files) Put(path string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files == nil {
		f.files = map[string][]byte{}
	}
	f.files[path] = slices.Clone(data)
}

// Get returns a file's content.
func (f *Files) Get(path string) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.files[path]
	return slices.Clone(b), ok
}

// Names lists every file, sorted.
func (f *Files) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.files))
}

// Exists implements provisioning.SeedFiles.
func (f *Files) Exists(path string) (bool, error) {
	if f.ExistsErr != nil {
		return false, f.ExistsErr
	}
	_, ok := f.Get(path)
	return ok, nil
}

// ReadSeed implements provisioning.SeedFiles.
func (f *Files) ReadSeed(path string) ([]byte, error) {
	b, ok := f.Get(path)
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, os.ErrNotExist)
	}
	return b, nil
}

// StageSeed implements provisioning.SeedFiles.
func (f *Files) StageSeed(path string, seed []byte) (string, error) {
	f.mu.Lock()
	f.staged++
	name := fmt.Sprintf("%s.staged-%d", path, f.staged)
	f.mu.Unlock()
	f.Put(name, seed)
	return name, nil
}

// PlaceSeed implements provisioning.SeedFiles.
func (f *Files) PlaceSeed(staged, path string) error {
	if f.PlaceErr != nil {
		return f.PlaceErr
	}
	if ok, _ := f.Exists(path); ok {
		return fmt.Errorf("%s: %w", path, os.ErrExist)
	}
	b, ok := f.Get(staged)
	if !ok {
		return fmt.Errorf("%s: %w", staged, os.ErrNotExist)
	}
	f.Put(path, b)
	return nil
}

// Discard implements provisioning.SeedFiles.
func (f *Files) Discard(staged string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, staged)
}

// WriteConfig implements provisioning.SeedFiles.
func (f *Files) WriteConfig(path string, data []byte) error {
	if f.ConfigErr != nil {
		return f.ConfigErr
	}
	f.Put(path, data)
	return nil
}
