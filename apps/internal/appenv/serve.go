package appenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/rxc-project/rxc/apps/internal/buildinfo"
	"github.com/rxc-project/rxc/apps/internal/healthprobe"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Server is a wired service that serves until ctx ends.
type Server interface {
	Run(ctx context.Context) error
}

// Serve is a service's serve command once its configuration is loaded: the
// JSON logger at level on stderr, the server wired by build, run until ctx
// ends.
func Serve[C any, S Server](ctx context.Context, cfg C, level string, stderr io.Writer, build func(context.Context, C, *slog.Logger) (S, error)) error {
	log, err := Logger(level, stderr)
	if err != nil {
		return err
	}
	srv, err := build(ctx, cfg, log)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

// ServeCommand is a service's serve command: load reads its configuration,
// level names the log level in it, and Serve runs what build wires.
func ServeCommand[C any, S Server](ctx context.Context, stderr io.Writer, load func() (C, error), level func(C) string, build func(context.Context, C, *slog.Logger) (S, error)) error {
	cfg, err := load()
	if err != nil {
		return err
	}
	return Serve(ctx, cfg, level(cfg), stderr, build)
}

// Loaded reads a C from the environment with Load.
func Loaded[C any]() (C, error) {
	var cfg C
	err := Load(&cfg)
	return cfg, err
}

// Closers release what a server holds (pools, connections, listeners), in
// the reverse order they were added. The zero value is ready.
type Closers []func()

// Add registers fn to run at Close.
func (c *Closers) Add(fn func()) { *c = append(*c, fn) }

// Close runs every registered function, newest first, and forgets them, so
// a second Close does nothing.
func (c *Closers) Close() {
	fns := *c
	*c = nil
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// Drainer is a server that finishes what it serves when shut down.
type Drainer struct {
	// Name labels the warning when it does not finish in time.
	Name     string
	Shutdown func(ctx context.Context) error
}

// Drain shuts the servers down one after the other, all within timeout
// (SHUTDOWN_TIMEOUT), logging each that does not finish in time.
func Drain(log *slog.Logger, timeout time.Duration, servers ...Drainer) {
	log.Info("shutting down", "timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil {
			log.Warn(s.Name+" shutdown", logkey.Error, err)
		}
	}
}

// Runner runs a subcommand with the arguments after its name.
type Runner func(ctx context.Context, args []string) error

// RunService is a service binary's Run: Dispatch over commands, then the
// command's runner and Exit with what it returned; `healthcheck` and
// `version`, which commands lists and runners does not, are ServiceTail's,
// with C and healthPath. It returns the process exit code.
func RunService[C Listener](ctx context.Context, binary, usage, healthPath string, commands map[string]Command, runners map[string]Runner, args []string, stdout, stderr io.Writer) int {
	cmd, code, done := Dispatch(binary, usage, commands, args, stdout, stderr)
	if done {
		return code
	}
	run, ok := runners[cmd]
	if !ok {
		return ServiceTail[C](ctx, binary, cmd, healthPath, stdout, stderr)
	}
	return Exit(binary, run(ctx, args[1:]), stderr)
}

// Listener is a service's configuration for `healthcheck`: the address it
// listens on (LISTEN_ADDR, with the service's default).
type Listener interface{ ListenAddress() string }

// ServiceTail runs the two commands every service's list ends with and
// returns the exit status: `healthcheck` reads C from the environment and
// probes path on loopback at its listen address's port (healthprobe), and
// `version` prints the binary's name and version.
func ServiceTail[C Listener](ctx context.Context, binary, cmd, path string, stdout, stderr io.Writer) int {
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, binary, buildinfo.Version)
		return 0
	case "healthcheck":
		var cfg C
		err := Load(&cfg)
		if err == nil {
			err = healthprobe.Check(ctx, cfg.ListenAddress(), path)
		}
		return Exit(binary, err, stderr)
	}
	return Exit(binary, fmt.Errorf("no command %q", cmd), stderr)
}
