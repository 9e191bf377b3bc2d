// Command provisioner is RXC's NATS operator authority: it bootstraps the
// operator and system account (init-operator), serves the URL account
// resolver and the credential API (serve), and applies its schema (migrate).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rxc-project/rxc/apps/provisioner/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
