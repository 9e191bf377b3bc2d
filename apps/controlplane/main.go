// Command controlplane runs RXC's control plane: tenants and their NATS
// provisioning, claim codes, sensor enrolment, commands and status, the
// sensor gRPC services behind mTLS, and the operator API.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rxc-project/rxc/apps/controlplane/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
