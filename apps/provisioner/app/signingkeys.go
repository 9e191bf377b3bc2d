package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seedfile"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/sdk/atomicfile"
)

// SigningKeyConfig is what add-signing-key and remove-signing-key read: the
// provisioner's database. The identity seed comes from a flag: it is kept
// offline and brought to these commands only.
type SigningKeyConfig struct {
	PGDSN                    string `envconfig:"PG_DSN" required:"true"`
	AccountSeedEncryptionKey string `envconfig:"ACCOUNT_SEED_ENCRYPTION_KEY" required:"true"`
}

// signingKeyFlags are the flags both commands share.
type signingKeyFlags struct {
	identitySeed   string
	natsConfigPath string
	resolverURL    string
	out            string // add
	key            string // remove
}

func signingKeyFlagSet(name string) (*flag.FlagSet, *signingKeyFlags) {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	var f signingKeyFlags
	fl.StringVar(&f.identitySeed, "identity-seed", "", "path of the operator's identity seed (required; mode 0600)")
	fl.StringVar(&f.natsConfigPath, "nats-config", "", "rewrite the nats-server config fragment (operator, system_account, resolver) at this path")
	fl.StringVar(&f.resolverURL, "resolver-url", "", "resolver URL for the fragment (default: the one in the operator JWT)")
	switch name {
	case "add-signing-key":
		fl.StringVar(&f.out, "out", "", "write the new signing key's seed to this new file (required; mode 0600)")
	case "remove-signing-key":
		fl.StringVar(&f.key, "key", "", "public key (O…) of the signing key to remove (required)")
	}
	return fl, &f
}

// signingKeyCommand runs add-signing-key or remove-signing-key.
func signingKeyCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fl, f := signingKeyFlagSet(name)
	if err := appenv.ParseFlags(fl, "provisioner", args, stderr); err != nil {
		return err
	}
	missing := []string{}
	if f.identitySeed == "" {
		missing = append(missing, "--identity-seed")
	}
	if name == "add-signing-key" && f.out == "" {
		missing = append(missing, "--out")
	}
	if name == "remove-signing-key" && f.key == "" {
		missing = append(missing, "--key")
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "provisioner %s: %s required (-h for help)\n", name, strings.Join(missing, " and "))
		return appenv.ErrUsage
	}
	var cfg SigningKeyConfig
	if err := appenv.Load(&cfg); err != nil {
		return err
	}
	if name == "add-signing-key" {
		return AddSigningKey(ctx, cfg, SigningKeyOptions{IdentitySeedPath: f.identitySeed, OutPath: f.out, NATSConfigPath: f.natsConfigPath, ResolverURL: f.resolverURL}, stdout, stderr)
	}
	return RemoveSigningKey(ctx, cfg, SigningKeyOptions{IdentitySeedPath: f.identitySeed, Key: f.key, NATSConfigPath: f.natsConfigPath, ResolverURL: f.resolverURL}, stdout, stderr)
}

// SigningKeyOptions are the two commands' flags.
type SigningKeyOptions struct {
	IdentitySeedPath string
	OutPath          string
	Key              string
	NATSConfigPath   string
	ResolverURL      string
}

// operatorSession is the store and the operator, opened with its identity
// seed.
type operatorSession struct {
	store    *provisionerstore.Store
	op       provisioning.Operator
	spec     jwtauthority.OperatorSpec
	identity []byte
	close    func()
}

func openOperator(ctx context.Context, cfg SigningKeyConfig, identityPath string, stderr io.Writer) (*operatorSession, error) {
	seed, err := seedfile.Read(identityPath)
	if err != nil {
		return nil, fmt.Errorf("--identity-seed: %w", err)
	}
	pub, err := jwtauthority.PublicKeyFromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("--identity-seed %s: %w", identityPath, err)
	}
	sealer, err := StoreConfig{AccountSeedEncryptionKey: cfg.AccountSeedEncryptionKey}.sealer()
	if err != nil {
		return nil, err
	}
	pool, err := appenv.Connect(ctx, cfg.PGDSN, 30*time.Second, appenv.CLILogger(stderr))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*operatorSession, error) { pool.Close(); return nil, err }
	if _, err := applyMigrations(ctx, pool); err != nil {
		return fail(err)
	}
	store, err := provisionerstore.New(provisionerstore.Config{Pool: pool, Sealer: sealer})
	if err != nil {
		return fail(err)
	}
	op, err := store.Operator(ctx)
	if err != nil {
		return fail(fmt.Errorf("read operator: %w", err))
	}
	if pub != op.PubKey {
		return fail(fmt.Errorf("--identity-seed %s holds %s, not the identity key of the store's operator %s (a signing key cannot change the signing keys)", identityPath, pub, op.PubKey))
	}
	idPub, spec, err := jwtauthority.ParseOperator(op.JWT)
	if err != nil || idPub != op.PubKey {
		return fail(fmt.Errorf("the store's operator JWT does not verify as %s's: %v", op.PubKey, err))
	}
	return &operatorSession{store: store, op: op, spec: spec, identity: seed, close: pool.Close}, nil
}

// replace signs the operator JWT with keys as its signing keys, stores it
// and rewrites the nats-server fragment when asked.
func (o *operatorSession) replace(ctx context.Context, keys []string, opts SigningKeyOptions, before func() error) (string, error) {
	spec := o.spec
	spec.SigningKeys = keys
	tok, err := jwtauthority.SignOperatorSpec(o.identity, spec)
	if err != nil {
		return "", err
	}
	resolverURL := opts.ResolverURL
	if resolverURL == "" {
		resolverURL = o.spec.AccountServerURL
	}
	if opts.NATSConfigPath != "" {
		if err := jwtauthority.ValidateResolverURL(resolverURL); err != nil {
			return "", fmt.Errorf("resolver URL %q (--resolver-url): %w", resolverURL, err)
		}
	}
	if before != nil {
		if err := before(); err != nil {
			return "", err
		}
	}
	if err := o.store.ReplaceOperatorJWT(ctx, o.op.PubKey, o.op.JWT, tok); err != nil {
		return "", err
	}
	if opts.NATSConfigPath != "" {
		frag := jwtauthority.RenderServerConfig(tok, o.op.SystemAccount, resolverURL)
		if err := atomicfile.Write(opts.NATSConfigPath, frag, 0o644); err != nil {
			return "", fmt.Errorf("operator JWT stored, but --nats-config: %w (run init-operator --nats-config to write it)", err)
		}
	}
	return tok, nil
}

// AddSigningKey creates a signing key, writes its seed to opts.OutPath and
// adds it to the operator JWT. Accounts stay signed as they are until a
// provisioner serving with the new key re-signs them at its start.
func AddSigningKey(ctx context.Context, cfg SigningKeyConfig, opts SigningKeyOptions, stdout, stderr io.Writer) error {
	if _, err := os.Lstat(opts.OutPath); err == nil {
		return fmt.Errorf("--out %s exists: refusing to replace a seed file", opts.OutPath)
	}
	o, err := openOperator(ctx, cfg, opts.IdentitySeedPath, stderr)
	if err != nil {
		return err
	}
	defer o.close()
	pub, seed, err := jwtauthority.NewSigningKey()
	if err != nil {
		return err
	}
	tmp, err := seedfile.Stage(opts.OutPath, seed)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	keys := append(slices.Clone(o.spec.SigningKeys), pub)
	if _, err := o.replace(ctx, keys, opts, nil); err != nil {
		return err
	}
	if err := os.Link(tmp, opts.OutPath); err != nil {
		return fmt.Errorf("signing key %s added to the operator, but its seed could not be placed at %s (it is at %s; move it there with mode 0600): %w", pub, opts.OutPath, tmp, err)
	}
	fmt.Fprintf(stdout, "signing key added: %s (seed in %s)\nsigning keys now: %s\n", pub, opts.OutPath, strings.Join(keys, ", "))
	fmt.Fprintln(stdout, "\nnext steps (docs/operations.md, rotating the operator signing key):")
	fmt.Fprintln(stdout, "  1. restart every nats-server with the new operator JWT (the --nats-config fragment); they trust both keys")
	fmt.Fprintf(stdout, "  2. put %s at OPERATOR_SEED_PATH of every provisioner replica and restart them: each re-signs the accounts at start\n", opts.OutPath)
	fmt.Fprintln(stdout, "  3. provisioner remove-signing-key --key <old key>, then restart the nats-servers again")
	return nil
}

// RemoveSigningKey takes a signing key out of the operator JWT. It refuses
// while any stored account JWT is signed by that key: nats-servers would
// refuse the account once they run the new operator JWT.
func RemoveSigningKey(ctx context.Context, cfg SigningKeyConfig, opts SigningKeyOptions, stdout, stderr io.Writer) error {
	o, err := openOperator(ctx, cfg, opts.IdentitySeedPath, stderr)
	if err != nil {
		return err
	}
	defer o.close()
	if !slices.Contains(o.spec.SigningKeys, opts.Key) {
		return fmt.Errorf("--key %s is not a signing key of operator %s (its signing keys: %s)", opts.Key, o.op.PubKey, describeKeys(o.spec.SigningKeys))
	}
	keys := slices.DeleteFunc(slices.Clone(o.spec.SigningKeys), func(k string) bool { return k == opts.Key })
	stillSigned := func() error {
		accts, err := o.store.ListAccounts(ctx)
		if err != nil {
			return err
		}
		var names []string
		for _, a := range accts {
			if c, err := jwt.DecodeAccountClaims(a.JWT); err == nil && c.Issuer == opts.Key {
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
			len(names), opts.Key, strings.Join(shown, ", "))
	}
	if _, err := o.replace(ctx, keys, opts, stillSigned); err != nil {
		if errors.Is(err, provisionerstore.ErrOperatorChanged) {
			return fmt.Errorf("%w: run it again", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "signing key removed: %s\nsigning keys now: %s\n", opts.Key, describeKeys(keys))
	fmt.Fprintln(stdout, "\nnext step: restart every nats-server with the new operator JWT (the --nats-config fragment); from then on they refuse accounts signed by the removed key")
	return nil
}

func describeKeys(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}
