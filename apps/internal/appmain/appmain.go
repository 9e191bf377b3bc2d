// Package appmain is what every binary's main does: run the command line
// with a context that SIGINT and SIGTERM cancel and exit with the status it
// returns, and tell whether a command line asks for help. It links only the
// standard library, so the sensor agent shares it with the services.
package appmain

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Run calls run with the command line's arguments and a context that
// SIGINT and SIGTERM cancel, and exits with the status run returns.
func Run(run func(ctx context.Context, args []string) int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// WantsHelp tells whether args ask for help (-h, -help, --help or help
// before any "--").
func WantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "help":
			return true
		}
	}
	return false
}
