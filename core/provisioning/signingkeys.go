package provisioning

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SigningKeyRecords is the part of the store signing-key rotation uses.
type SigningKeyRecords interface {
	// Operator returns the operator, or ErrNoOperator.
	Operator(ctx context.Context) (Operator, error)
	// ListAccounts returns every account (any kind).
	ListAccounts(ctx context.Context) ([]Account, error)
	// ReplaceOperatorJWT replaces the operator's JWT when the stored one
	// is still oldJWT, and returns ErrOperatorChanged otherwise.
	ReplaceOperatorJWT(ctx context.Context, pubKey, oldJWT, newJWT string) error
}

// ErrOperatorChanged is ReplaceOperatorJWT finding another operator JWT
// than the one the caller read: someone changed it meanwhile.
var ErrOperatorChanged = errors.New("the operator JWT changed meanwhile")

// KeyRotationConfig wires a KeyRotator.
type KeyRotationConfig struct {
	Store     SigningKeyRecords
	Authority OperatorAuthority
	Files     SeedFiles
}

// KeyRotator adds and removes the operator's signing keys
// (add-signing-key, remove-signing-key): the operator JWT, signed with the
// identity key, lists the keys that may sign accounts. The identity seed is
// kept offline and brought to these two use cases only.
type KeyRotator struct {
	seedTools
	store SigningKeyRecords
}

// NewKeyRotator checks cfg.
func NewKeyRotator(cfg KeyRotationConfig) (*KeyRotator, error) {
	tools, err := newSeedTools("signing-key rotation", cfg.Store != nil, cfg.Authority, cfg.Files)
	if err != nil {
		return nil, err
	}
	return &KeyRotator{seedTools: tools, store: cfg.Store}, nil
}

// seedTools is what the use cases run with the operator's seeds at hand
// (init-operator, signing-key rotation) hold besides their store: the
// authority that signs with the seeds and the files that keep them.
type seedTools struct {
	auth  OperatorAuthority
	files SeedFiles
}

// newSeedTools checks that use has its store, authority and seed files.
func newSeedTools(use string, hasStore bool, auth OperatorAuthority, files SeedFiles) (seedTools, error) {
	if !hasStore || auth == nil || files == nil {
		return seedTools{}, fmt.Errorf("provisioning: %s needs a store, an operator authority and seed files", use)
	}
	return seedTools{auth: auth, files: files}, nil
}

// writeFragment writes op's nats-server configuration fragment, naming
// resolverURL, to path; without a path it writes nothing.
func (st seedTools) writeFragment(path string, op Operator, resolverURL string) error {
	if path == "" {
		return nil
	}
	return st.files.WriteConfig(path, st.auth.ServerConfig(op, resolverURL))
}

// SigningKeyRequest is what add-signing-key and remove-signing-key are
// asked for.
type SigningKeyRequest struct {
	// IdentitySeedPath holds the operator's identity seed (required).
	IdentitySeedPath string
	// OutPath receives the new signing key's seed (add; required, must
	// not exist).
	OutPath string
	// Key is the public key of the signing key to remove (remove;
	// required).
	Key string
	// NATSConfigPath, when set, receives the nats-server configuration
	// fragment with the new operator JWT.
	NATSConfigPath string
	// ResolverURL goes into the fragment; "" keeps the operator JWT's.
	ResolverURL string
}

// SigningKeyResult is what a rotation step changed.
type SigningKeyResult struct {
	// Key is the signing key added or removed.
	Key string
	// Keys are the operator's signing keys now.
	Keys []string
}

// rotation is the stored operator opened with its identity seed.
type rotation struct {
	op       Operator
	spec     OperatorJWT
	identity []byte
}

// open reads the identity seed and the stored operator, and checks that
// the seed is the operator's identity key and its JWT verifies as its.
func (r *KeyRotator) open(ctx context.Context, identityPath string) (rotation, error) {
	seed, err := r.files.ReadSeed(identityPath)
	if err != nil {
		return rotation{}, fmt.Errorf("--identity-seed: %w", err)
	}
	pub, err := r.auth.PublicKeyFromSeed(seed)
	if err != nil {
		return rotation{}, fmt.Errorf("--identity-seed %s: %w", identityPath, err)
	}
	op, err := r.store.Operator(ctx)
	if err != nil {
		return rotation{}, fmt.Errorf("read operator: %w", err)
	}
	if pub != op.PubKey {
		return rotation{}, fmt.Errorf("--identity-seed %s holds %s, not the identity key of the store's operator %s (a signing key cannot change the signing keys)", identityPath, pub, op.PubKey)
	}
	idPub, spec, err := r.auth.ReadOperator(op.JWT)
	if err != nil || idPub != op.PubKey {
		return rotation{}, fmt.Errorf("the store's operator JWT does not verify as %s's: %v", op.PubKey, err)
	}
	return rotation{op: op, spec: spec, identity: seed}, nil
}

// replace signs the operator JWT with keys as its signing keys, stores it
// and writes the nats-server fragment when asked. check, when set, runs
// after the request was validated and before anything is signed.
func (r *KeyRotator) replace(ctx context.Context, o rotation, keys []string, req SigningKeyRequest, check func() error) error {
	resolverURL := cmp.Or(req.ResolverURL, o.spec.ResolverURL)
	if req.NATSConfigPath != "" {
		if err := r.auth.CheckResolverURL(resolverURL); err != nil {
			return fmt.Errorf("resolver URL %q (--resolver-url): %w", resolverURL, err)
		}
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	spec := o.spec
	spec.SigningKeys = keys
	tok, err := r.auth.SignOperator(o.identity, spec)
	if err != nil {
		return err
	}
	if err := r.store.ReplaceOperatorJWT(ctx, o.op.PubKey, o.op.JWT, tok); err != nil {
		return err
	}
	op := o.op
	op.JWT = tok
	if err := r.writeFragment(req.NATSConfigPath, op, resolverURL); err != nil {
		return fmt.Errorf("operator JWT stored, but --nats-config: %w (run init-operator --nats-config to write it)", err)
	}
	return nil
}

// AddSigningKey creates a signing key, writes its seed to req.OutPath and
// adds it to the operator JWT. The seed is staged first and placed only
// after the store took the new JWT; a staged seed that could not be placed
// is kept (the error says where), since the stored operator lists its key.
// Accounts stay signed as they are until a provisioner serving with the new
// key re-signs them at its start.
func (r *KeyRotator) AddSigningKey(ctx context.Context, req SigningKeyRequest) (SigningKeyResult, error) {
	exists, err := r.files.Exists(req.OutPath)
	if err != nil {
		return SigningKeyResult{}, fmt.Errorf("--out %s: %w", req.OutPath, err)
	}
	if exists {
		return SigningKeyResult{}, fmt.Errorf("--out %s exists: refusing to replace a seed file", req.OutPath)
	}
	o, err := r.open(ctx, req.IdentitySeedPath)
	if err != nil {
		return SigningKeyResult{}, err
	}
	pub, seed, err := r.auth.NewSigningKey()
	if err != nil {
		return SigningKeyResult{}, err
	}
	staged, err := r.files.StageSeed(req.OutPath, seed)
	if err != nil {
		return SigningKeyResult{}, err
	}
	keys := append(slices.Clone(o.spec.SigningKeys), pub)
	if err := r.replace(ctx, o, keys, req, nil); err != nil {
		r.files.Discard(staged)
		return SigningKeyResult{}, err
	}
	if err := r.files.PlaceSeed(staged, req.OutPath); err != nil {
		return SigningKeyResult{}, fmt.Errorf("signing key %s added to the operator, but its seed could not be placed at %s (it is at %s; move it there with mode 0600): %w", pub, req.OutPath, staged, err)
	}
	r.files.Discard(staged)
	return SigningKeyResult{Key: pub, Keys: keys}, nil
}

// RemoveSigningKey takes a signing key out of the operator JWT. It refuses
// while any stored account JWT is signed by that key: nats-servers would
// refuse the account once they run the new operator JWT.
func (r *KeyRotator) RemoveSigningKey(ctx context.Context, req SigningKeyRequest) (SigningKeyResult, error) {
	o, err := r.open(ctx, req.IdentitySeedPath)
	if err != nil {
		return SigningKeyResult{}, err
	}
	if !slices.Contains(o.spec.SigningKeys, req.Key) {
		return SigningKeyResult{}, fmt.Errorf("--key %s is not a signing key of operator %s (its signing keys: %s)", req.Key, o.op.PubKey, DescribeKeys(o.spec.SigningKeys))
	}
	keys := slices.DeleteFunc(slices.Clone(o.spec.SigningKeys), func(k string) bool { return k == req.Key })
	stillSigned := func() error { return r.stillSigned(ctx, req.Key) }
	if err := r.replace(ctx, o, keys, req, stillSigned); err != nil {
		if errors.Is(err, ErrOperatorChanged) {
			return SigningKeyResult{}, fmt.Errorf("%w: run it again", err)
		}
		return SigningKeyResult{}, err
	}
	return SigningKeyResult{Key: req.Key, Keys: keys}, nil
}

// stillSigned fails when any stored account JWT is signed by key.
func (r *KeyRotator) stillSigned(ctx context.Context, key string) error {
	accts, err := r.store.ListAccounts(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, a := range accts {
		if issuer, err := r.auth.AccountIssuer(a.JWT); err == nil && issuer == key {
			names = append(names, a.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	shown := names
	if len(shown) > 5 {
		shown = append(slices.Clone(shown[:5]), "…")
	}
	return fmt.Errorf("%d account JWTs are still signed by %s (%s): restart a provisioner replica whose OPERATOR_SEED_PATH holds another signing key (it re-signs every account at start), then run this again; nothing was changed",
		len(names), key, strings.Join(shown, ", "))
}

// DescribeKeys lists signing keys for a message, "none" when there are
// none.
func DescribeKeys(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}
