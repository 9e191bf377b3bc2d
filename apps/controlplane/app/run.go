// Package app is the control plane binary's wiring: configuration from the
// environment (envconfig), adapters built by hand and injected into the
// fleet and operators services, background workers, and the HTTP and gRPC
// servers. It lives outside main so integration tests can run a real control
// plane in-process.
package app

import (
	"context"
	"flag"
	"io"

	"github.com/rxc-project/rxc/apps/internal/appenv"
)

const usage = `usage: controlplane <command> [flags]

commands:
  serve            run the HTTP API (:5009) and the sensor gRPC services (:5010)
  migrate          apply the control plane's database schema
  init-ca          create the sensor CA and the gRPC server certificate in CA_DIR
  rotate-ca        start (or with --finish end) a sensor CA rotation with an overlap
  create-operator  create an operator account (password read from standard input)
  healthcheck      probe this service's own health endpoint on loopback (for container runtimes)
  version          print the version

Run "controlplane <command> -h" for a command's flags and the environment variables it reads.
`

// healthConfig is what `healthcheck` reads.
type healthConfig struct {
	ListenAddr string `envconfig:"LISTEN_ADDR" default:":5009"`
}

// ListenAddress implements appenv.Listener.
func (c healthConfig) ListenAddress() string { return c.ListenAddr }

// caConfig is what `init-ca` reads.
type caConfig struct {
	CADir string `envconfig:"CA_DIR" default:"ca"`
}

// command is one subcommand's help: the first line of text is the usage,
// then what it does.
func command(text string, flags func() *flag.FlagSet, specs []any) appenv.Command {
	return appenv.Command{Text: text, Flags: flags, Specs: specs}
}

// subcommands' help: the first line is the usage, then what it does.
var helps = map[string]appenv.Command{
	"serve":   command("usage: controlplane serve\n\nRuns the HTTP API (LISTEN_ADDR) and the sensor gRPC services behind mTLS (GRPC_LISTEN_ADDR)\nuntil SIGINT or SIGTERM.", nil, []any{&ServeConfig{}}),
	"migrate": command("usage: controlplane migrate\n\nApplies the control plane's database schema to PG_DSN and prints what it applied.", nil, []any{&appenv.MigrateConfig{}}),
	"init-ca": command("usage: controlplane init-ca --dns NAME|--ip ADDR ... [flags]\n\nCreates the sensor CA in CA_DIR (never replacing an existing CA key) and the gRPC server\ncertificate for the given names. An existing server certificate for the same names is kept; one\nfor other names is replaced only with --replace-server-cert.",
		func() *flag.FlagSet { fl, _ := initCAFlags(); return fl }, []any{&caConfig{}}),
	"rotate-ca": command("usage: controlplane rotate-ca [--finish]\n\nStarts a sensor CA rotation in CA_DIR: a new CA issues sensor certificates while the previous one\nstays trusted and keeps the gRPC server certificate; sensors receive both CA certificates when they\nenrol or renew. --finish, once every sensor renewed, issues the server certificate from the new CA\nand removes the previous one. A running control plane takes each step without a restart.",
		func() *flag.FlagSet { fl, _ := rotateCAFlags(); return fl }, []any{&caConfig{}}),
	"create-operator": command("usage: controlplane create-operator --email ADDRESS [--role admin|operator|viewer] [--tenants ID,…] < password-file\n\nCreates an operator account (an admin unless --role says otherwise); the password is the first line of standard input, so it never\nappears in a process listing or shell history.",
		func() *flag.FlagSet { fl, _ := createOperatorFlags(); return fl }, []any{&appenv.MigrateConfig{}}),
	"healthcheck": command("usage: controlplane healthcheck\n\nProbes this service's /readyz on loopback at LISTEN_ADDR's port; exit status 0 when ready\n(for container runtimes).", nil, []any{&healthConfig{}}),
	"version":     command("usage: controlplane version\n\nPrints the version.", nil, nil),
}

// Run dispatches a subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return appenv.RunService[healthConfig](ctx, "controlplane", usage, "/readyz", helps, map[string]appenv.Runner{
		"serve": func(ctx context.Context, _ []string) error { return serve(ctx, stderr) },
		"migrate": func(ctx context.Context, _ []string) error {
			return appenv.Migrate(ctx, stdout, stderr, applyMigrations)
		},
		"init-ca":   func(_ context.Context, args []string) error { return initCA(args, stdout, stderr) },
		"rotate-ca": func(_ context.Context, args []string) error { return rotateCA(args, stdout, stderr) },
		"create-operator": func(ctx context.Context, args []string) error {
			return createOperator(ctx, args, stdin, stdout, stderr)
		},
	}, args, stdout, stderr)
}
