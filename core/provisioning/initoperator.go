package provisioning

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// OperatorRecords is the part of the store init-operator uses.
type OperatorRecords interface {
	// Operator returns the operator, or ErrNoOperator.
	Operator(ctx context.Context) (Operator, error)
	// InitOperator stores the operator with its SYS and CONTROL accounts,
	// all at once; it fails if an operator exists.
	InitOperator(ctx context.Context, op Operator, sys, control Account) error
}

// OperatorJWT is what an operator JWT says.
type OperatorJWT struct {
	Name          string
	SystemAccount string
	// ResolverURL is where nats-server fetches account JWTs.
	ResolverURL string
	// SigningKeys may sign the operator's accounts besides its identity key.
	SigningKeys []string
}

// OperatorAuthority creates an operator's keys, signs its JWT and its
// first accounts, reads the JWTs back, and renders the nats-server
// configuration that trusts it (adapters/nats/jwtauthority.Authority).
// init-operator and signing-key rotation use it.
type OperatorAuthority interface {
	NewOperatorKey() (pub string, seed []byte, err error)
	NewSigningKey() (pub string, seed []byte, err error)
	PublicKeyFromSeed(seed []byte) (string, error)
	// HoldsKey is nil when pub may sign op's accounts: op's identity key
	// or a signing key its JWT lists.
	HoldsKey(op Operator, pub string) error
	// AccountSigner signs accounts with signingSeed; controlAccount is the
	// CONTROL account tenant accounts import from ("" before it exists).
	AccountSigner(signingSeed []byte, controlAccount string) (Signer, error)
	// SignOperator signs the operator's JWT with its identity seed.
	SignOperator(identitySeed []byte, spec OperatorJWT) (string, error)
	// ReadOperator decodes an operator JWT, checks that it is self-signed
	// by the identity key it names, and returns that key and what it says.
	ReadOperator(operatorJWT string) (identity string, spec OperatorJWT, err error)
	// AccountIssuer returns the key that signed an account JWT.
	AccountIssuer(accountJWT string) (string, error)
	// CheckResolverURL is nil when nats-server can fetch accounts from url.
	CheckResolverURL(url string) error
	// ServerConfig is the nats-server configuration fragment trusting op
	// and fetching accounts from resolverURL.
	ServerConfig(op Operator, resolverURL string) []byte
}

// SeedFiles is the file system init-operator keeps seeds and the
// configuration fragment in (adapters/seedfile).
type SeedFiles interface {
	// Exists reports whether anything is at path.
	Exists(path string) (bool, error)
	// ReadSeed reads a seed file, refusing one others can read.
	ReadSeed(path string) ([]byte, error)
	// StageSeed writes seed to a new private file beside path and returns
	// that file's name.
	StageSeed(path string, seed []byte) (staged string, err error)
	// PlaceSeed gives the staged file the name path, failing if path
	// exists: a seed file is never replaced.
	PlaceSeed(staged, path string) error
	// Discard removes a staged file that was not placed (or was linked).
	Discard(staged string)
	// WriteConfig replaces the file at path with data, atomically.
	WriteConfig(path string, data []byte) error
}

// InitConfig wires an Initializer.
type InitConfig struct {
	Store     OperatorRecords
	Authority OperatorAuthority
	Files     SeedFiles
	Clock     Clock
}

// Initializer runs init-operator: it creates the operator key, the SYS
// and CONTROL accounts and the nats-server configuration fragment.
type Initializer struct {
	seedTools
	store OperatorRecords
	now   Clock
}

// NewInitializer checks cfg.
func NewInitializer(cfg InitConfig) (*Initializer, error) {
	tools, err := newSeedTools("init-operator", cfg.Store != nil, cfg.Authority, cfg.Files)
	if err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Initializer{seedTools: tools, store: cfg.Store, now: cfg.Clock}, nil
}

// InitRequest is what init-operator is asked for.
type InitRequest struct {
	// Name is the operator's name.
	Name string
	// ResolverURL is the URL nats-server fetches account JWTs from.
	ResolverURL string
	// SeedPath receives the seed serve signs accounts with.
	SeedPath string
	// IdentitySeedPath, when set, receives the operator's identity seed,
	// and SeedPath a signing key's seed: the operator JWT lists the
	// signing key, which signs every account, so the identity key is only
	// needed to change the signing keys.
	IdentitySeedPath string
	// NATSConfigPath, when set, receives the nats-server configuration
	// fragment (operator, system account, resolver).
	NATSConfigPath string
	// ControlAccountName names the CONTROL account.
	ControlAccountName string
}

// InitResult is the operator init-operator settled on.
type InitResult struct {
	Operator Operator
	// Created is true when this run created the operator, false when the
	// seed file and the store already agreed on one.
	Created bool
}

// InitOperator creates the operator, or finds the one the seed file and
// the store agree on, and writes the configuration fragment when asked to.
// It never replaces an existing operator: a seed file without a stored
// operator, a stored operator without its seed file, or a seed file that
// is not the stored operator's stops it. When only the fragment fails, the
// result still names the operator, which exists.
func (in *Initializer) InitOperator(ctx context.Context, req InitRequest) (InitResult, error) {
	res, err := in.ensure(ctx, req)
	if err != nil {
		return InitResult{}, err
	}
	if err := in.writeFragment(req.NATSConfigPath, res.Operator, req.ResolverURL); err != nil {
		return res, fmt.Errorf("--nats-config: %w", err)
	}
	return res, nil
}

// ensure returns the existing operator when seed file and store agree,
// creates one when neither exists, and refuses every other state.
func (in *Initializer) ensure(ctx context.Context, req InitRequest) (InitResult, error) {
	op, storeErr := in.store.Operator(ctx)
	if storeErr != nil && !errors.Is(storeErr, ErrNoOperator) && !errors.Is(storeErr, ErrNotFound) {
		return InitResult{}, storeErr
	}
	hasStore := storeErr == nil
	hasSeed, err := in.files.Exists(req.SeedPath)
	if err != nil {
		return InitResult{}, fmt.Errorf("operator seed file: %w", err)
	}
	switch {
	case hasSeed && hasStore:
		seed, err := in.files.ReadSeed(req.SeedPath)
		if err != nil {
			return InitResult{}, err
		}
		pub, err := in.auth.PublicKeyFromSeed(seed)
		if err != nil {
			return InitResult{}, fmt.Errorf("operator seed file %s: %w", req.SeedPath, err)
		}
		if err := in.auth.HoldsKey(op, pub); err != nil {
			return InitResult{}, fmt.Errorf("operator seed file %s: %w: refusing to continue", req.SeedPath, err)
		}
		return InitResult{Operator: op}, nil
	case hasSeed:
		return InitResult{}, fmt.Errorf("operator seed file %s exists but the store has no operator: point PG_DSN at the right database or move the seed file away deliberately", req.SeedPath)
	case hasStore:
		return InitResult{}, fmt.Errorf("the store has operator %s but the seed file %s is missing: restore the seed file from backup", op.PubKey, req.SeedPath)
	}
	op, err = in.create(ctx, req)
	if err != nil {
		return InitResult{}, err
	}
	return InitResult{Operator: op, Created: true}, nil
}

// create makes the operator and its two accounts. The seed files are
// staged first and placed only after the store committed, so a failure
// leaves neither a lone seed file nor a lone record that a re-run would
// refuse. Once the store committed, a staged seed that could not be placed
// is kept where it was staged (the error says where): it is the only copy
// of a key the stored operator needs.
func (in *Initializer) create(ctx context.Context, req InitRequest) (Operator, error) {
	op, sys, ctl, seeds, err := in.mint(req)
	if err != nil {
		return Operator{}, err
	}
	staged := make([]string, len(seeds))
	keep := make([]bool, len(seeds))
	defer func() {
		for i, tmp := range staged {
			if tmp != "" && !keep[i] {
				in.files.Discard(tmp)
			}
		}
	}()
	for i, s := range seeds {
		if exists, _ := in.files.Exists(s.path); exists {
			return Operator{}, fmt.Errorf("%s exists: refusing to replace a seed file", s.path)
		}
		tmp, err := in.files.StageSeed(s.path, s.seed)
		if err != nil {
			return Operator{}, err
		}
		staged[i] = tmp
	}
	if err := in.store.InitOperator(ctx, op, sys, ctl); err != nil {
		return Operator{}, fmt.Errorf("store operator: %w", err)
	}
	var failed []error
	for i, s := range seeds {
		if err := in.files.PlaceSeed(staged[i], s.path); err != nil {
			keep[i] = true
			failed = append(failed, fmt.Errorf("%s (it is at %s; move it there with mode 0600): %w", s.path, staged[i], err))
		}
	}
	if len(failed) > 0 {
		return Operator{}, fmt.Errorf("operator stored but a seed file could not be placed at %w", errors.Join(failed...))
	}
	return op, nil
}

// seedAt is a seed and the path it goes to.
type seedAt struct {
	path string
	seed []byte
}

// mint creates the operator's keys, its SYS and CONTROL accounts and its
// JWT, and says which seed goes where. Without an identity seed path the
// identity key signs the accounts and is the seed serve reads; with one a
// signing key is both.
func (in *Initializer) mint(req InitRequest) (op Operator, sys, ctl Account, seeds []seedAt, err error) {
	opPub, opSeed, err := in.auth.NewOperatorKey()
	if err != nil {
		return op, sys, ctl, nil, err
	}
	signingSeed := opSeed
	var signingKeys []string
	if req.IdentitySeedPath != "" {
		pub, seed, err := in.auth.NewSigningKey()
		if err != nil {
			return op, sys, ctl, nil, err
		}
		signingSeed, signingKeys = seed, []string{pub}
	}
	keys, err := in.auth.AccountSigner(signingSeed, "")
	if err != nil {
		return op, sys, ctl, nil, err
	}
	now := in.now().UTC()
	newAccount := func(kind AccountKind, name string) (Account, error) {
		pub, seed, err := keys.NewAccountKey()
		if err != nil {
			return Account{}, err
		}
		return Account{PubKey: pub, Kind: kind, Name: name, Seed: seed, CreatedAt: now, UpdatedAt: now}, nil
	}
	if sys, err = newAccount(KindSystem, "SYS"); err != nil {
		return op, sys, ctl, nil, err
	}
	if ctl, err = newAccount(KindControl, req.ControlAccountName); err != nil {
		return op, sys, ctl, nil, err
	}
	signer, err := in.auth.AccountSigner(signingSeed, ctl.PubKey)
	if err != nil {
		return op, sys, ctl, nil, err
	}
	for _, a := range []*Account{&sys, &ctl} {
		if a.JWT, err = signer.SignAccount(AccountSpec{PubKey: a.PubKey, Name: a.Name, Kind: a.Kind}); err != nil {
			return op, sys, ctl, nil, fmt.Errorf("sign %s account: %w", a.Name, err)
		}
	}
	opJWT, err := in.auth.SignOperator(opSeed, OperatorJWT{
		Name: req.Name, SystemAccount: sys.PubKey, ResolverURL: req.ResolverURL, SigningKeys: signingKeys,
	})
	if err != nil {
		return op, sys, ctl, nil, err
	}
	op = Operator{PubKey: opPub, Name: req.Name, JWT: opJWT, SystemAccount: sys.PubKey, ControlAccount: ctl.PubKey, CreatedAt: now}
	seeds = []seedAt{{path: req.SeedPath, seed: signingSeed}}
	if req.IdentitySeedPath != "" {
		seeds = append(seeds, seedAt{path: req.IdentitySeedPath, seed: opSeed})
	}
	return op, sys, ctl, seeds, nil
}
