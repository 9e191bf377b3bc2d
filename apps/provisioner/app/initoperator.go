package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seedfile"
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
	if err := jwtauthority.ValidateResolverURL(opts.ResolverURL); err != nil {
		return appenv.Usagef(stderr, "provisioner", "init-operator", "--resolver-url: %v", err)
	}
	var cfg StoreConfig
	if err := appenv.Load(&cfg); err != nil {
		return err
	}
	if opts.IdentitySeedPath != "" && filepath.Clean(opts.IdentitySeedPath) == filepath.Clean(cfg.OperatorSeedPath) {
		return appenv.Usagef(stderr, "provisioner", "init-operator", "--identity-seed must differ from OPERATOR_SEED_PATH (the signing key serve uses)")
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
// the nats-server config fragment (provisioning.Initializer, on the
// PostgreSQL store, the operator authority and the seed files). It never
// replaces an existing operator: when the seed file and the store agree it
// only rewrites the fragment.
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
	sealer, err := cfg.sealer()
	if err != nil {
		return provisioning.Operator{}, err
	}
	pool, err := appenv.ConnectMigrated(ctx, cfg.PGDSN, log, applyMigrations)
	if err != nil {
		return provisioning.Operator{}, err
	}
	defer pool.Close()
	store, err := provisionerstore.New(provisionerstore.Config{Pool: pool, Sealer: sealer})
	if err != nil {
		return provisioning.Operator{}, err
	}
	initializer, err := provisioning.NewInitializer(provisioning.InitConfig{
		Store:     store,
		Authority: jwtauthority.Authority{Stream: cfg.CommandStreamName, ControlJetStream: cfg.controlLimits()},
		Files:     seedfile.Files{},
	})
	if err != nil {
		return provisioning.Operator{}, err
	}
	res, err := initializer.InitOperator(ctx, provisioning.InitRequest{
		Name: opts.Name, ResolverURL: opts.ResolverURL, SeedPath: cfg.OperatorSeedPath, IdentitySeedPath: opts.IdentitySeedPath,
		NATSConfigPath: opts.NATSConfigPath, ControlAccountName: cfg.ControlAccountName,
	})
	if res.Operator.PubKey != "" {
		if res.Created {
			fmt.Fprintln(stdout, "operator created")
		} else {
			fmt.Fprintln(stdout, "operator already initialised; seed file and store agree")
		}
	}
	if err != nil {
		return provisioning.Operator{}, err
	}
	op := res.Operator
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

func (c StoreConfig) controlLimits() jwtauthority.Limits {
	return jwtauthority.Limits{DiskStorage: c.ControlJSMaxDisk, MemoryStorage: c.ControlJSMaxMemory, Streams: -1, Consumers: -1}
}
