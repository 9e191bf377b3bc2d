package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rxc-project/rxc/adapters/atomicfile"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/core/provisioning"
)

// DefaultResolverURL is where nats-server finds the resolver by default.
const DefaultResolverURL = "http://127.0.0.1:8080/jwt/v1/accounts/"

// initOperatorFlags is init-operator's command line.
func initOperatorFlags() (*flag.FlagSet, *InitOptions) {
	fl := flag.NewFlagSet("init-operator", flag.ContinueOnError)
	var opts InitOptions
	fl.StringVar(&opts.Name, "name", "RXC", "operator name")
	fl.StringVar(&opts.ResolverURL, "resolver-url", DefaultResolverURL, "URL nats-server uses to fetch account JWTs (ends in /jwt/v1/accounts/)")
	fl.StringVar(&opts.NATSConfigPath, "nats-config", "", "write the nats-server config fragment (operator, system_account, resolver) to this path")
	fl.StringVar(&opts.IdentitySeedPath, "identity-seed", "", "write the operator's identity seed here (to be kept offline) and a signing key's seed to OPERATOR_SEED_PATH, which serve signs accounts with")
	return fl, &opts
}

// initOperator parses init-operator's flags and environment.
func initOperator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl, opts := initOperatorFlags()
	if err := appenv.ParseFlags(fl, "provisioner", args, stderr); err != nil {
		return err
	}
	var cfg StoreConfig
	if err := appenv.Load(&cfg); err != nil {
		return err
	}
	_, err := initOperatorLogged(ctx, cfg, *opts, stdout, appenv.CLILogger(stderr))
	return err
}

// InitOptions are init-operator's flags.
type InitOptions struct {
	Name           string
	ResolverURL    string
	NATSConfigPath string
	// IdentitySeedPath, when set, receives the operator's identity seed,
	// and OPERATOR_SEED_PATH a signing key's seed: the operator JWT lists
	// the signing key, which signs every account, so the identity key is
	// only needed to change the signing keys (docs/operations.md).
	IdentitySeedPath string
}

// InitOperator creates the operator key, the SYS and CONTROL accounts and
// the nats-server config fragment. It never replaces an existing operator:
// when the seed file and the store agree it only rewrites the fragment.
func InitOperator(ctx context.Context, cfg StoreConfig, opts InitOptions, stdout io.Writer) (provisioning.Operator, error) {
	return initOperatorLogged(ctx, cfg, opts, stdout, slog.New(slog.DiscardHandler))
}

// initOperatorLogged is InitOperator telling log how the database connection goes.
func initOperatorLogged(ctx context.Context, cfg StoreConfig, opts InitOptions, stdout io.Writer, log *slog.Logger) (provisioning.Operator, error) {
	if opts.Name == "" {
		opts.Name = "RXC"
	}
	if opts.ResolverURL == "" {
		opts.ResolverURL = DefaultResolverURL
	}
	if err := jwtauthority.ValidateResolverURL(opts.ResolverURL); err != nil {
		return provisioning.Operator{}, fmt.Errorf("--resolver-url: %w", err)
	}
	if opts.IdentitySeedPath != "" && filepath.Clean(opts.IdentitySeedPath) == filepath.Clean(cfg.OperatorSeedPath) {
		return provisioning.Operator{}, errors.New("--identity-seed must differ from OPERATOR_SEED_PATH (the signing key serve uses)")
	}
	op, err := ensureOperator(ctx, cfg, opts, stdout, log)
	if err != nil {
		return provisioning.Operator{}, err
	}
	if opts.NATSConfigPath != "" {
		frag := jwtauthority.RenderServerConfig(op.JWT, op.SystemAccount, opts.ResolverURL)
		if err := atomicfile.Write(opts.NATSConfigPath, frag, 0o644); err != nil {
			return provisioning.Operator{}, fmt.Errorf("--nats-config: %w", err)
		}
	}
	fmt.Fprintf(stdout, "operator:        %s\nsystem account:  %s\ncontrol account: %s\n", op.PubKey, op.SystemAccount, op.ControlAccount)
	fmt.Fprintln(stdout, "\nnext steps:")
	if opts.NATSConfigPath != "" {
		fmt.Fprintf(stdout, "  1. include %s in the nats-server configuration (include %q) and enable JetStream\n", opts.NATSConfigPath, filepath.Base(opts.NATSConfigPath))
	} else {
		fmt.Fprintln(stdout, "  1. re-run with --nats-config PATH to write the nats-server config fragment")
	}
	fmt.Fprintf(stdout, "  2. start `provisioner serve` so that %s answers\n", opts.ResolverURL)
	fmt.Fprintln(stdout, "  3. start nats-server, then the control plane")
	return op, nil
}

func ensureOperator(ctx context.Context, cfg StoreConfig, opts InitOptions, stdout io.Writer, log *slog.Logger) (provisioning.Operator, error) {
	sealer, err := cfg.sealer()
	if err != nil {
		return provisioning.Operator{}, err
	}
	pool, err := appenv.Connect(ctx, cfg.PGDSN, 30*time.Second, log)
	if err != nil {
		return provisioning.Operator{}, err
	}
	defer pool.Close()
	if _, err := applyMigrations(ctx, pool); err != nil {
		return provisioning.Operator{}, err
	}
	store, err := provisionerstore.New(provisionerstore.Config{Pool: pool, Sealer: sealer})
	if err != nil {
		return provisioning.Operator{}, err
	}
	op, storeErr := store.Operator(ctx)
	if storeErr != nil && !errors.Is(storeErr, provisioning.ErrNoOperator) && !errors.Is(storeErr, provisioning.ErrNotFound) {
		return provisioning.Operator{}, storeErr
	}
	hasStore := storeErr == nil
	_, statErr := os.Lstat(cfg.OperatorSeedPath)
	hasSeed := statErr == nil
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return provisioning.Operator{}, fmt.Errorf("operator seed file: %w", statErr)
	}
	switch {
	case hasSeed && hasStore:
		seed, err := readSeed(cfg.OperatorSeedPath)
		if err != nil {
			return provisioning.Operator{}, err
		}
		pub, err := jwtauthority.PublicKeyFromSeed(seed)
		if err != nil {
			return provisioning.Operator{}, fmt.Errorf("operator seed file %s: %w", cfg.OperatorSeedPath, err)
		}
		if err := operatorHoldsKey(op, pub); err != nil {
			return provisioning.Operator{}, fmt.Errorf("operator seed file %s: %w: refusing to continue", cfg.OperatorSeedPath, err)
		}
		fmt.Fprintln(stdout, "operator already initialised; seed file and store agree")
		return op, nil
	case hasSeed:
		return provisioning.Operator{}, fmt.Errorf("operator seed file %s exists but the store has no operator: point PG_DSN at the right database or move the seed file away deliberately", cfg.OperatorSeedPath)
	case hasStore:
		return provisioning.Operator{}, fmt.Errorf("the store has operator %s but the seed file %s is missing: restore the seed file from backup", op.PubKey, cfg.OperatorSeedPath)
	}
	op, err = create(ctx, store, cfg, opts)
	if err != nil {
		return provisioning.Operator{}, err
	}
	fmt.Fprintln(stdout, "operator created")
	return op, nil
}

// create makes the operator and its two accounts. The seed file is written
// under a temporary name first and linked into place only after the store
// committed, so a failure leaves neither a lone seed file nor a lone record
// that a re-run would refuse.
func create(ctx context.Context, store *provisionerstore.Store, cfg StoreConfig, opts InitOptions) (provisioning.Operator, error) {
	opPub, opSeed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		return provisioning.Operator{}, err
	}
	// Without --identity-seed the identity key signs the accounts and is
	// the file serve reads; with it a signing key is both.
	signingSeed, identityPath := opSeed, ""
	var signingKeys []string
	if opts.IdentitySeedPath != "" {
		pub, seed, err := jwtauthority.NewSigningKey()
		if err != nil {
			return provisioning.Operator{}, err
		}
		signingSeed, identityPath, signingKeys = seed, opts.IdentitySeedPath, []string{pub}
	}
	signer, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: signingSeed, Stream: cfg.CommandStreamName, ControlJetStream: cfg.controlLimits()})
	if err != nil {
		return provisioning.Operator{}, err
	}
	now := time.Now().UTC()
	newAccount := func(kind provisioning.AccountKind, accountName string) (provisioning.Account, error) {
		pub, seed, err := signer.NewAccountKey()
		if err != nil {
			return provisioning.Account{}, err
		}
		return provisioning.Account{PubKey: pub, Kind: kind, Name: accountName, Seed: seed, CreatedAt: now, UpdatedAt: now}, nil
	}
	sys, err := newAccount(provisioning.KindSystem, "SYS")
	if err != nil {
		return provisioning.Operator{}, err
	}
	ctl, err := newAccount(provisioning.KindControl, cfg.ControlAccountName)
	if err != nil {
		return provisioning.Operator{}, err
	}
	if signer, err = signer.WithControlAccount(ctl.PubKey); err != nil {
		return provisioning.Operator{}, err
	}
	for _, a := range []*provisioning.Account{&sys, &ctl} {
		if a.JWT, err = signer.SignAccount(provisioning.AccountSpec{PubKey: a.PubKey, Name: a.Name, Kind: a.Kind}); err != nil {
			return provisioning.Operator{}, fmt.Errorf("sign %s account: %w", a.Name, err)
		}
	}
	opJWT, err := jwtauthority.SignOperatorSpec(opSeed, jwtauthority.OperatorSpec{
		Name: opts.Name, SystemAccount: sys.PubKey, AccountServerURL: opts.ResolverURL, SigningKeys: signingKeys,
	})
	if err != nil {
		return provisioning.Operator{}, err
	}
	op := provisioning.Operator{PubKey: opPub, Name: opts.Name, JWT: opJWT, SystemAccount: sys.PubKey, ControlAccount: ctl.PubKey, CreatedAt: now}

	files := []struct{ path, tmp string }{{path: cfg.OperatorSeedPath}}
	seeds := [][]byte{signingSeed}
	if identityPath != "" {
		files = append(files, struct{ path, tmp string }{path: identityPath})
		seeds = append(seeds, opSeed)
	}
	for i := range files {
		if _, err := os.Lstat(files[i].path); err == nil {
			return provisioning.Operator{}, fmt.Errorf("%s exists: refusing to replace a seed file", files[i].path)
		}
		tmp, err := writeSeedTemp(files[i].path, seeds[i])
		if err != nil {
			return provisioning.Operator{}, err
		}
		defer os.Remove(tmp)
		files[i].tmp = tmp
	}
	if err := store.InitOperator(ctx, op, sys, ctl); err != nil {
		return provisioning.Operator{}, fmt.Errorf("store operator: %w", err)
	}
	for _, f := range files {
		// os.Link fails if the target exists: a seed is never overwritten.
		if err := os.Link(f.tmp, f.path); err != nil {
			return provisioning.Operator{}, fmt.Errorf("operator stored but a seed file could not be placed at %s (it is at %s; move it there with mode 0600): %w", f.path, f.tmp, err)
		}
	}
	return op, nil
}

// operatorHoldsKey tells whether pub may sign op's accounts: op's identity
// key or a signing key its JWT lists.
func operatorHoldsKey(op provisioning.Operator, pub string) error {
	if pub == op.PubKey {
		return nil
	}
	idPub, spec, err := jwtauthority.ParseOperator(op.JWT)
	if err != nil {
		return fmt.Errorf("the store's operator JWT: %w", err)
	}
	if idPub != op.PubKey {
		return fmt.Errorf("the store's operator JWT is of %s, not %s", idPub, op.PubKey)
	}
	if spec.Trusts(idPub, pub) {
		return nil
	}
	keys := "none"
	if len(spec.SigningKeys) > 0 {
		keys = strings.Join(spec.SigningKeys, ", ")
	}
	return fmt.Errorf("it holds key %s but the store's operator is %s, with signing keys: %s", pub, op.PubKey, keys)
}

// writeSeedTemp writes seed to a new 0600 file beside path, creating the
// parent folder 0700 if needed.
func writeSeedTemp(path string, seed []byte) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("operator seed folder: %w", err)
	}
	f, err := os.CreateTemp(dir, ".operator-seed-*")
	if err != nil {
		return "", fmt.Errorf("operator seed file: %w", err)
	}
	name := f.Name()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	if _, err := f.Write(append(seed, '\n')); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(name)
		return "", err
	}
	return name, f.Close()
}

func (c StoreConfig) controlLimits() jwtauthority.Limits {
	return jwtauthority.Limits{DiskStorage: c.ControlJSMaxDisk, MemoryStorage: c.ControlJSMaxMemory, Streams: -1, Consumers: -1}
}
