// Command provisioner is RXC's NATS operator authority: it bootstraps the
// operator and system account (init-operator), serves the URL account
// resolver and the credential API (serve), and applies its schema (migrate).
package main

import (
	"context"
	"os"

	"github.com/rxc-project/rxc/apps/internal/appmain"
	"github.com/rxc-project/rxc/apps/provisioner/app"
)

func main() {
	appmain.Run(func(ctx context.Context, args []string) int { return app.Run(ctx, args, os.Stdout, os.Stderr) })
}
