// Command sensor-agent is RXC's reference sensor agent: it enrols with a
// claim code, takes start and stop commands over NATS, reports status,
// sends health checks and events over mutual-TLS gRPC and renews its
// certificate. Its capture engine is simulated unless another Runner is
// plugged in.
package main

import (
	"context"
	"os"

	"github.com/rxc-project/rxc/apps/internal/appmain"
	"github.com/rxc-project/rxc/apps/sensor-agent/app"
)

func main() {
	appmain.Run(func(ctx context.Context, args []string) int { return app.Run(ctx, args, os.Stdout, os.Stderr) })
}
