// Package app is the provisioner binary's wiring: it reads configuration
// from the environment, builds the adapters, injects them into the
// provisioning service and runs the chosen subcommand. It lives outside main
// so that integration tests elsewhere can run a real provisioner in-process.
package app

import (
	"context"
	"flag"
	"io"

	"github.com/rxc-project/rxc/apps/internal/appenv"
)

const usage = `usage: provisioner <command> [flags]

commands:
  init-operator  create the operator, SYS and CONTROL accounts and write the nats-server config fragment
  serve          serve the account resolver and the credential API
  migrate        apply the database schema
  reseal         re-encrypt every account and user seed with a new ACCOUNT_SEED_ENCRYPTION_KEY
  add-signing-key     add an operator signing key (needs the identity seed)
  remove-signing-key  remove an operator signing key no account is signed with any more
  healthcheck    probe this service's /healthz on loopback (for container runtimes)
  version        print the version

Run "provisioner <command> -h" for a command's flags and the environment variables it reads.
`

// healthConfig is what `healthcheck` reads.
type healthConfig struct {
	ListenAddr string `envconfig:"LISTEN_ADDR" default:":8080"`
}

// ListenAddress implements appenv.Listener.
func (c healthConfig) ListenAddress() string { return c.ListenAddr }

// command is one subcommand's help: the first line of text is the usage,
// then what it does.
func command(text string, flags func() *flag.FlagSet, specs []any) appenv.Command {
	return appenv.Command{Text: text, Flags: flags, Specs: specs}
}

// subcommands' help: the first line is the usage, then what it does.
var helps = map[string]appenv.Command{
	"init-operator": command("usage: provisioner init-operator [flags]\n\nCreates the operator key (OPERATOR_SEED_PATH, 0600), the SYS and CONTROL accounts in the store,\nand with --nats-config the nats-server config fragment. Never replaces an existing operator.",
		func() *flag.FlagSet { fl, _ := initOperatorFlags(); return fl }, []any{&StoreConfig{}}),
	"serve": command("usage: provisioner serve\n\nServes the account resolver and the credential API on LISTEN_ADDR and keeps a connection to\nNATS_URL for claim pushes and stream administration, until SIGINT or SIGTERM.",
		nil, []any{&ServeConfig{}}),
	"migrate": command("usage: provisioner migrate\n\nApplies the provisioner's database schema to PG_DSN and prints what it applied.", nil, []any{&appenv.MigrateConfig{}}),
	"reseal":  command("usage: provisioner reseal\n\nRe-encrypts every account and user seed from ACCOUNT_SEED_ENCRYPTION_KEY to\nNEW_ACCOUNT_SEED_ENCRYPTION_KEY in one transaction (all or nothing); records already under the new key\nare left alone, so it can run again. Stop the provisioner replicas first, then start them with the\nnew key (docs/operations.md).", nil, []any{&ResealConfig{}}),
	"add-signing-key": command("usage: provisioner add-signing-key --identity-seed PATH --out PATH [--nats-config PATH]\n\nCreates an operator signing key, writes its seed to --out (0600) and adds it to the operator JWT\n(signed with the identity seed), rewriting the nats-server fragment with --nats-config. Restart the\nnats-servers, then the provisioner replicas with the new seed at OPERATOR_SEED_PATH: they re-sign\nevery account at start (docs/operations.md).",
		func() *flag.FlagSet { fl, _ := signingKeyFlagSet("add-signing-key"); return fl }, []any{&SigningKeyConfig{}}),
	"remove-signing-key": command("usage: provisioner remove-signing-key --identity-seed PATH --key O… [--nats-config PATH]\n\nRemoves a signing key from the operator JWT; refused while any account JWT is still signed by\nit. Restart the nats-servers afterwards: they then refuse accounts signed by the removed key.",
		func() *flag.FlagSet { fl, _ := signingKeyFlagSet("remove-signing-key"); return fl }, []any{&SigningKeyConfig{}}),
	"healthcheck": command("usage: provisioner healthcheck\n\nProbes this service's /healthz on loopback at LISTEN_ADDR's port; exit status 0 when healthy\n(for container runtimes).", nil, []any{&healthConfig{}}),
	"version":     command("usage: provisioner version\n\nPrints the version.", nil, nil),
}

// Run dispatches a subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	signingKey := func(cmd string) appenv.Runner {
		return func(ctx context.Context, args []string) error {
			return signingKeyCommand(ctx, cmd, args, stdout, stderr)
		}
	}
	return appenv.RunService[healthConfig](ctx, "provisioner", usage, "/healthz", helps, map[string]appenv.Runner{
		"init-operator":      func(ctx context.Context, args []string) error { return initOperator(ctx, args, stdout, stderr) },
		"add-signing-key":    signingKey("add-signing-key"),
		"remove-signing-key": signingKey("remove-signing-key"),
		"serve":              func(ctx context.Context, _ []string) error { return serve(ctx, stderr) },
		"migrate": func(ctx context.Context, _ []string) error {
			return appenv.Migrate(ctx, stdout, stderr, applyMigrations)
		},
		"reseal": func(ctx context.Context, _ []string) error { return reseal(ctx, stdout, stderr) },
	}, args, stdout, stderr)
}
