// Command sensor-agent is RXC's reference sensor agent: it enrols with a
// claim code, takes start and stop commands over NATS, reports status,
// sends health checks and events over mutual-TLS gRPC and renews its
// certificate. Its capture engine is simulated unless another Runner is
// plugged in.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rxc-project/rxc/apps/sensor-agent/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
