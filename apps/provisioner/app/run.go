// Package app is the provisioner binary's wiring: it reads configuration
// from the environment, builds the adapters, injects them into the
// provisioning service and runs the chosen subcommand. It lives outside main
// so that integration tests elsewhere can run a real provisioner in-process.
package app

import (
	"context"
	"fmt"
	"io"

	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/internal/buildinfo"
	"github.com/rxc-project/rxc/internal/healthprobe"
)

const usage = `usage: provisioner <command> [flags]

commands:
  init-operator  create the operator, SYS and CONTROL accounts and write the nats-server config fragment
  serve          serve the account resolver and the credential API
  migrate        apply the database schema
  healthcheck    probe this service's /healthz on loopback (for container runtimes)
  version        print the version

Configuration is read from the environment; see the README.
`

// Run dispatches a subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "init-operator":
		err = initOperator(ctx, args[1:], stdout, stderr)
	case "serve":
		err = serve(ctx, stderr)
	case "migrate":
		err = appenv.Migrate(ctx, stdout, applyMigrations)
	case "healthcheck":
		var cfg struct {
			ListenAddr string `envconfig:"LISTEN_ADDR" default:":8080"`
		}
		if err = appenv.Load(&cfg); err == nil {
			err = healthprobe.Check(ctx, cfg.ListenAddr, "/healthz")
		}
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "provisioner", buildinfo.Version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "provisioner: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "provisioner:", err)
		return 1
	}
	return 0
}
