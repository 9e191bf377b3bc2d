// Command controlplane runs RXC's control plane: tenants and their NATS
// provisioning, claim codes, sensor enrolment, commands and status, the
// sensor gRPC services behind mTLS, and the operator API.
package main

import (
	"context"
	"os"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/internal/appmain"
)

func main() {
	appmain.Run(func(ctx context.Context, args []string) int {
		return app.Run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
	})
}
