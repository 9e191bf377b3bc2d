package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seedfile"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/core/provisioning"
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

// openRotator connects to the store and wires provisioning.KeyRotator on
// it, the operator authority and the seed files.
func openRotator(ctx context.Context, cfg SigningKeyConfig, stderr io.Writer) (*provisioning.KeyRotator, func(), error) {
	sealer, err := StoreConfig{AccountSeedEncryptionKey: cfg.AccountSeedEncryptionKey}.sealer()
	if err != nil {
		return nil, nil, err
	}
	pool, err := appenv.ConnectMigrated(ctx, cfg.PGDSN, appenv.CLILogger(stderr), applyMigrations)
	if err != nil {
		return nil, nil, err
	}
	store, err := provisionerstore.New(provisionerstore.Config{Pool: pool, Sealer: sealer})
	if err == nil {
		var r *provisioning.KeyRotator
		if r, err = provisioning.NewKeyRotator(provisioning.KeyRotationConfig{Store: store, Authority: jwtauthority.Authority{}, Files: seedfile.Files{}}); err == nil {
			return r, pool.Close, nil
		}
	}
	pool.Close()
	return nil, nil, err
}

// rotate runs one step of provisioning.KeyRotator (AddSigningKey or
// RemoveSigningKey) with opts on a rotator wired by openRotator, closing
// the store afterwards.
func rotate(ctx context.Context, cfg SigningKeyConfig, opts SigningKeyOptions, stderr io.Writer,
	step func(*provisioning.KeyRotator, context.Context, provisioning.SigningKeyRequest) (provisioning.SigningKeyResult, error)) (provisioning.SigningKeyResult, error) {
	r, closeStore, err := openRotator(ctx, cfg, stderr)
	if err != nil {
		return provisioning.SigningKeyResult{}, err
	}
	defer closeStore()
	return step(r, ctx, opts.request())
}

func (o SigningKeyOptions) request() provisioning.SigningKeyRequest {
	return provisioning.SigningKeyRequest{
		IdentitySeedPath: o.IdentitySeedPath, OutPath: o.OutPath, Key: o.Key, NATSConfigPath: o.NATSConfigPath, ResolverURL: o.ResolverURL,
	}
}

// AddSigningKey creates a signing key, writes its seed to opts.OutPath and
// adds it to the operator JWT (provisioning.KeyRotator.AddSigningKey).
// Accounts stay signed as they are until a provisioner serving with the new
// key re-signs them at its start.
func AddSigningKey(ctx context.Context, cfg SigningKeyConfig, opts SigningKeyOptions, stdout, stderr io.Writer) error {
	res, err := rotate(ctx, cfg, opts, stderr, (*provisioning.KeyRotator).AddSigningKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "signing key added: %s (seed in %s)\nsigning keys now: %s\n", res.Key, opts.OutPath, strings.Join(res.Keys, ", "))
	fmt.Fprintln(stdout, "\nnext steps (docs/operations.md, rotating the operator signing key):")
	fmt.Fprintln(stdout, "  1. restart every nats-server with the new operator JWT (the --nats-config fragment); they trust both keys")
	fmt.Fprintf(stdout, "  2. put %s at OPERATOR_SEED_PATH of every provisioner replica and restart them: each re-signs the accounts at start\n", opts.OutPath)
	fmt.Fprintln(stdout, "  3. provisioner remove-signing-key --key <old key>, then restart the nats-servers again")
	return nil
}

// RemoveSigningKey takes a signing key out of the operator JWT
// (provisioning.KeyRotator.RemoveSigningKey). It refuses while any stored
// account JWT is signed by that key: nats-servers would refuse the account
// once they run the new operator JWT.
func RemoveSigningKey(ctx context.Context, cfg SigningKeyConfig, opts SigningKeyOptions, stdout, stderr io.Writer) error {
	res, err := rotate(ctx, cfg, opts, stderr, (*provisioning.KeyRotator).RemoveSigningKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "signing key removed: %s\nsigning keys now: %s\n", res.Key, provisioning.DescribeKeys(res.Keys))
	fmt.Fprintln(stdout, "\nnext step: restart every nats-server with the new operator JWT (the --nats-config fragment); from then on they refuse accounts signed by the removed key")
	return nil
}
