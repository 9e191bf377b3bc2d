// Package app is the control plane binary's wiring: configuration from the
// environment (envconfig), adapters built by hand and injected into the
// fleet and operators services, background workers, and the HTTP and gRPC
// servers. It lives outside main so integration tests can run a real control
// plane in-process.
package app

import (
	"context"
	"fmt"
	"io"

	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/internal/buildinfo"
	"github.com/rxc-project/rxc/internal/healthprobe"
)

const usage = `usage: controlplane <command> [flags]

commands:
  serve            run the HTTP API (:5009) and the sensor gRPC services (:5010)
  migrate          apply the control plane's database schema
  init-ca          create the sensor CA and the gRPC server certificate in CA_DIR
  create-operator  create an operator account (password read from standard input)
  healthcheck      probe this service's own health endpoint on loopback (for container runtimes)
  version          print the version

Configuration is read from the environment; see the README.
`

// Run dispatches a subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, stderr)
	case "migrate":
		err = appenv.Migrate(ctx, stdout, applyMigrations)
	case "init-ca":
		err = initCA(args[1:], stdout, stderr)
	case "create-operator":
		err = createOperator(ctx, args[1:], stdin, stdout, stderr)
	case "healthcheck":
		var cfg struct {
			ListenAddr string `envconfig:"LISTEN_ADDR" default:":5009"`
		}
		if err = appenv.Load(&cfg); err == nil {
			err = healthprobe.Check(ctx, cfg.ListenAddr, "/readyz")
		}
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "controlplane", buildinfo.Version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "controlplane: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "controlplane:", err)
		return 1
	}
	return 0
}
