// Command rxc-dev runs the whole RXC system on this machine for development
// and demos: PostgreSQL, the provisioner, nats-server, the control plane,
// the operator console and a few simulated sensors, all on loopback, all
// kept in one state folder (default ./.demo) so that the next run resumes.
// It prints the console's address and the operator's login, and stops
// everything on Ctrl-C. The control plane's analytics chat is configured by
// the same ANALYTICS_CHAT_* variables as the control plane's; it stays off
// when they are unset.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/apps/internal/appmain"
	"github.com/rxc-project/rxc/apps/internal/buildinfo"
	"github.com/rxc-project/rxc/apps/rxc-dev/devstack"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("rxc-dev", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: rxc-dev [flags]   (-h for help)")
	}
	var cfg devstack.Config
	fl.StringVar(&cfg.StateDir, "state", ".demo", "state folder; a later run with the same folder resumes")
	fl.StringVar(&cfg.ProvisionerAddr, "provisioner-addr", "127.0.0.1:8080", "provisioner HTTP address (port 0: any free port)")
	fl.StringVar(&cfg.NATSAddr, "nats-addr", "127.0.0.1:4222", "nats-server address")
	fl.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:5009", "control plane HTTP API address")
	fl.StringVar(&cfg.GRPCAddr, "grpc-addr", "127.0.0.1:5010", "control plane sensor gRPC address")
	fl.StringVar(&cfg.WebAddr, "web-addr", "127.0.0.1:8000", "console address (also the origin the API allows, even with -web none)")
	fl.IntVar(&cfg.PGPort, "pg-port", 0, "PostgreSQL port (0: any free port)")
	fl.StringVar(&cfg.Web, "web", devstack.WebAuto, "console server: auto (nginx if installed, else Go), nginx, go or none")
	fl.StringVar(&cfg.WebDir, "web-dir", "web", "the repository's web/ folder (dist/ from make -C web build, nginx/, the entrypoint hook)")
	fl.StringVar(&cfg.Tenant, "tenant", "demo", "tenant created at start (empty: none)")
	fl.IntVar(&cfg.Sensors, "sensors", 3, "simulated sensors enrolled in the tenant")
	fl.IntVar(&cfg.SeedSensors, "seed-sensors", 0, "fake sensors written straight into the database (in -seed-tenant), for a large fleet in the console; they never report")
	fl.StringVar(&cfg.SeedTenant, "seed-tenant", "fleet", "tenant of the -seed-sensors sensors (created when missing)")
	fl.BoolVar(&cfg.StartSensors, "start-sensors", true, "start the simulated sensors no operator has commanded yet, so they stream events at once")
	fl.StringVar(&cfg.SensorAgent, "sensor-agent", "bin/sensor-agent", "sensor agent binary that runs the simulated sensors")
	fl.StringVar(&cfg.LogLevel, "log-level", "info", "services' log level (logs go to STATE/logs)")
	fl.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "bound on stopping everything")
	readyFile := fl.String("ready-file", "", "write the URLs and the login as JSON to this file once everything is ready (removed at stop)")
	printEnv := fl.Bool("print-env", false, "print the URLs and the login as one JSON line on standard output once ready (progress goes to standard error)")
	version := fl.Bool("version", false, "print the version")
	clean := fl.Bool("clean", false, "stop nothing, start nothing: delete the state folder and its PostgreSQL cluster (make demo-clean)")
	if appmain.WantsHelp(args) {
		text := "usage: rxc-dev [flags]\n\nRuns the whole RXC system locally (see the README's two commands): PostgreSQL, the provisioner,\n" +
			"nats-server, the control plane, the console and simulated sensors, all on loopback, state in -state.\n" +
			"The analytics chat reads the control plane's ANALYTICS_CHAT_* variables (docs/controlplane.md: Analytics and chat); off when unset.\n" +
			"PG_BIN names the folder of PostgreSQL's initdb and pg_ctl when they are not in Debian's place or on PATH."
		var env chatEnv
		if err := appenv.Help(stdout, text, fl, &env); err != nil {
			fmt.Fprintln(stderr, "rxc-dev:", err)
			return 1
		}
		return 0
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version {
		fmt.Fprintln(stdout, "rxc-dev", buildinfo.Version)
		return 0
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "rxc-dev: unexpected argument %q\n", fl.Arg(0))
		return 2
	}
	if *clean {
		removed, err := devstack.Clean(cfg.StateDir)
		if err != nil {
			fmt.Fprintln(stderr, "rxc-dev:", err)
			return 1
		}
		for _, r := range removed {
			fmt.Fprintln(stdout, "removed", r)
		}
		return 0
	}
	chat, err := chatConfig()
	if err != nil {
		fmt.Fprintln(stderr, "rxc-dev:", err)
		return 2
	}
	cfg.Chat = chat
	progress := stdout
	if *printEnv {
		progress = stderr
	}
	cfg.Progress = progress
	stack, err := devstack.New(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "rxc-dev:", err)
		return 2
	}

	if *readyFile != "" {
		// A file left by a killed run must not announce this one early.
		if err := os.Remove(*readyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(stderr, "rxc-dev: ready file:", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err = stack.Start(startCtx)
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, "rxc-dev:", err)
		return 1
	}
	info := stack.Info()
	code := 0
	if err := announce(info, *readyFile, *printEnv, stdout, progress); err != nil {
		fmt.Fprintln(stderr, "rxc-dev:", err)
		code = 1
		stop()
	}

	<-ctx.Done()
	// A second Ctrl-C now ends the process at once.
	stop()
	fmt.Fprintln(progress, "stopping…")
	if *readyFile != "" {
		_ = os.Remove(*readyFile)
	}
	if err := stack.Stop(context.Background()); err != nil {
		fmt.Fprintln(stderr, "rxc-dev:", err)
		return 1
	}
	fmt.Fprintln(progress, "stopped; run again to resume from", info.StateDir)
	return code
}

// chatEnv is the environment rxc-dev reads.
type chatEnv struct {
	Chat app.ChatConfig `envconfig:"ANALYTICS_CHAT"`
}

// chatConfig reads the control plane's ANALYTICS_CHAT_ group from the
// environment, defaults included.
func chatConfig() (app.ChatConfig, error) {
	var env chatEnv
	err := appenv.Load(&env)
	return env.Chat, err
}

// announce tells the user, and any program waiting on the ready file,
// where everything is.
func announce(info devstack.Info, readyFile string, printEnv bool, stdout, progress io.Writer) error {
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if readyFile != "" {
		if err := writeReady(readyFile, append(data, '\n')); err != nil {
			return fmt.Errorf("ready file: %w", err)
		}
	}
	if printEnv {
		fmt.Fprintf(stdout, "%s\n", data)
	}
	fmt.Fprintln(progress)
	fmt.Fprintln(progress, "RXC is running.")
	if info.WebURL != "" {
		fmt.Fprintf(progress, "  open      %s\n", info.WebURL)
	}
	fmt.Fprintf(progress, "  login     %s / %s  (kept in %s)\n", info.Email, info.Password, filepath.Join(info.StateDir, "operator.txt"))
	fmt.Fprintf(progress, "  API       %s/api\n", info.APIBaseURL)
	fmt.Fprintf(progress, "  sensors   %d in tenant %q\n", info.Sensors, info.Tenant)
	if info.SeededSensors > 0 {
		fmt.Fprintf(progress, "  seeded    %d fake sensors in tenant %q\n", info.SeededSensors, info.SeedTenant)
	}
	fmt.Fprintf(progress, "  NATS      %s   gRPC %s   provisioner %s\n", info.NATSURL, info.GRPCAddr, info.ProvisionerURL)
	fmt.Fprintf(progress, "  metrics   %s   PostgreSQL %s\n", info.MetricsURL, pgAddr(info.PGDSN))
	fmt.Fprintln(progress, "  (every listener is on loopback)")
	fmt.Fprintf(progress, "  logs      %s\n", filepath.Join(info.StateDir, "logs"))
	fmt.Fprintln(progress, "Press Ctrl-C to stop; the next run resumes from the same state.")
	return nil
}

// pgAddr is the host and port of a PostgreSQL URL, or the URL when it does not parse.
func pgAddr(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return dsn
	}
	return u.Host
}

// writeReady writes the file under a temporary name first, so a reader never
// sees half of it; 0600, as it holds the operator's password.
func writeReady(p string, data []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
