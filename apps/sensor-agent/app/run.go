// Package app is the reference sensor agent's wiring: command-line flags
// (with environment fallbacks), one Agent per sensor (enrolment or
// resumption from a state directory, commands and status over NATS, health
// checks and events over mutual-TLS gRPC, certificate renewal) and the
// pluggable capture engine it drives, simulated by default. It lives
// outside main so tests run the real agent in-process.
package app

import (
	"bufio"
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rxc-project/rxc/apps/internal/appmain"
	"github.com/rxc-project/rxc/apps/internal/buildinfo"
	sensorpb "github.com/rxc-project/rxc/proto"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/sensorclient"
)

const usage = `usage: sensor-agent <command> [flags]

commands:
  run        enrol (first run) or resume a sensor and serve it until SIGINT/SIGTERM
  version    print the version

Run "sensor-agent run -h" for the flags of run.
`

// Run dispatches a subcommand and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "sensor-agent", buildinfo.Version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "sensor-agent: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// runFlags are the options of `sensor-agent run`.
type runFlags struct {
	api             string
	stateDir        string
	claimCode       string
	hostname        string
	apiCA           string
	heartbeat       time.Duration
	count           int
	claimCodesFile  string
	eventsPerMinute int
	failAfter       time.Duration
	batchInterval   time.Duration
	grpcIdle        time.Duration
	logLevel        string
	labels          labelFlag
}

// labelFlag collects repeatable --label key=value. The control plane holds
// them to its rules (400 invalid_labels naming the key) at enrolment.
type labelFlag map[string]string

func (l *labelFlag) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, 0, len(*l))
	for k, v := range *l {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (l *labelFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("label %q: want key=value", s)
	}
	if *l == nil {
		*l = labelFlag{}
	}
	if _, dup := (*l)[k]; dup {
		return fmt.Errorf("label %q given twice", k)
	}
	(*l)[k] = v
	return nil
}

func parseRunFlags(args []string, stderr io.Writer) (runFlags, error) {
	host, _ := os.Hostname()
	var f runFlags
	fs := flag.NewFlagSet("sensor-agent run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.api, "api", envOr("RXC_API_BASE_URL", "http://localhost:5009"), "control plane base URL (env RXC_API_BASE_URL)")
	fs.StringVar(&f.stateDir, "state-dir", envOr("RXC_STATE_DIR", "rxc-sensor"), "state directory, created 0700 (env RXC_STATE_DIR)")
	fs.StringVar(&f.claimCode, "claim-code", "", "claim code for the first run; prefer env RXC_CLAIM_CODE, which other users cannot see in the process list")
	fs.StringVar(&f.hostname, "hostname", envOr("RXC_SENSOR_HOSTNAME", host), "hostname reported when redeeming the claim code (env RXC_SENSOR_HOSTNAME)")
	fs.StringVar(&f.apiCA, "api-ca", "", "PEM file of the CA that signed an https API's certificate (default: system roots)")
	fs.DurationVar(&f.heartbeat, "heartbeat", 15*time.Second, "period of status reports and health checks")
	fs.IntVar(&f.count, "count", 1, "number of simulated sensors to run, each in STATE_DIR/sensor-<i> (i from 1) when N > 1 or --claim-codes-file is set")
	fs.StringVar(&f.claimCodesFile, "claim-codes-file", "", "with --count: file with one claim code per line, line i for sensor i")
	fs.IntVar(&f.eventsPerMinute, "events-per-minute", 30, "simulated alerts per minute while running")
	fs.DurationVar(&f.failAfter, "simulate-failure-after", 0, "make the simulated capture engine fail this long after each start (0: never)")
	fs.DurationVar(&f.batchInterval, "event-batch-interval", sensorclient.DefaultBatchInterval, "longest time events wait on a stream before the server confirms them")
	fs.DurationVar(&f.grpcIdle, "grpc-idle-timeout", sensorclient.DefaultIdleTimeout, "close the gRPC connection to the control plane after this long without a call (health check or event stream); 0: keep it open")
	fs.Var(&f.labels, "label", "key=value declared for the sensor at enrolment; repeatable (at most 16; keys a-z 0-9 . _ -, values A-Z a-z 0-9 . _ -)")
	fs.StringVar(&f.logLevel, "log-level", envOr("RXC_LOG_LEVEL", "info"), "debug, info, warn or error (env RXC_LOG_LEVEL)")
	if len(args) > 0 && args[0] != "-h" {
		// Mistakes are told in one line by the caller, not with the flag package's dump of every flag.
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	multi := f.count > 1 || f.claimCodesFile != ""
	if f.claimCode == "" && !multi {
		f.claimCode = os.Getenv("RXC_CLAIM_CODE")
	}
	switch {
	case f.count < 1:
		return f, errors.New("--count must be at least 1")
	case f.count > 1 && f.claimCode != "":
		return f, errors.New("--count > 1 takes its claim codes from --claim-codes-file, not --claim-code")
	case f.claimCodesFile != "" && f.claimCode != "":
		return f, errors.New("use either --claim-code or --claim-codes-file")
	case f.heartbeat < time.Second:
		return f, errors.New("--heartbeat must be at least 1s")
	case f.batchInterval <= 0:
		return f, errors.New("--event-batch-interval must be positive")
	case f.grpcIdle < 0:
		return f, errors.New("--grpc-idle-timeout must not be negative")
	}
	return f, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if appmain.WantsHelp(args) {
		fmt.Fprint(stdout, "usage: sensor-agent run [flags]\n\nEnrols (first run, with a claim code) or resumes a sensor and serves it until SIGINT or SIGTERM.\n"+
			"Each flag falls back to the environment variable named in its description.\n\nflags:\n")
		_, _ = parseRunFlags([]string{"-h"}, stdout)
		return 0
	}
	f, err := parseRunFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "sensor-agent run: %v (-h for help)\n", err)
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "sensor-agent run: --log-level %q: use debug, info, warn or error (-h for help)\n", f.logLevel)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	err = run(ctx, f, log)
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// Interrupted while still enrolling: a requested stop, not a failure.
		log.Info("sensor agent interrupted before it was enrolled")
		return 0
	}
	fmt.Fprintln(stderr, "sensor-agent:", err)
	return 1
}

func run(ctx context.Context, f runFlags, log *slog.Logger) error {
	var roots *x509.CertPool
	if f.apiCA != "" {
		data, err := os.ReadFile(f.apiCA)
		if err != nil {
			return fmt.Errorf("--api-ca: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(data) {
			return fmt.Errorf("--api-ca %s: no PEM certificate", f.apiCA)
		}
	}
	base := AgentConfig{
		API: f.api, APIRootCAs: roots, Hostname: f.hostname, Heartbeat: f.heartbeat,
		EventBatchInterval: f.batchInterval, GRPCIdleTimeout: cmp.Or(f.grpcIdle, -1), Version: buildinfo.Version,
		Labels: f.labels,
		NewRunner: func(sensorID string, events chan<- *sensorpb.SensorEvent) (Runner, error) {
			return NewSimulated(SimulatedConfig{
				SensorID: sensorID, EventsPerMinute: f.eventsPerMinute, Events: events, FailAfter: f.failAfter,
				Logger: log.With(logkey.Sensor, sensorID, "component", "runner"),
			})
		},
	}
	if f.count == 1 && f.claimCodesFile == "" {
		cfg := base
		cfg.StateDir, cfg.ClaimCode, cfg.Logger = f.stateDir, f.claimCode, log
		return runAgent(ctx, cfg)
	}
	codes, err := readClaimCodes(f.claimCodesFile)
	if err != nil {
		return err
	}
	log.Info("running simulated sensors", "count", f.count, "state_dir", f.stateDir)
	errs := make([]error, f.count)
	var wg sync.WaitGroup
	for i := 1; i <= f.count; i++ {
		cfg := base
		cfg.StateDir = filepath.Join(f.stateDir, fmt.Sprintf("sensor-%d", i))
		cfg.Logger = log.With(logkey.Sensor, i)
		cfg.Hostname = fmt.Sprintf("%s-%d", f.hostname, i)
		if i <= len(codes) {
			cfg.ClaimCode = codes[i-1]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runAgent(ctx, cfg); err != nil && ctx.Err() == nil {
				// The other sensors go on; say now why this one stopped.
				cfg.Logger.Error("sensor stopped", logkey.Error, err)
				errs[i-1] = fmt.Errorf("sensor %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func runAgent(ctx context.Context, cfg AgentConfig) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(cfg.StateDir)), 0o700); err != nil {
		return err
	}
	a, err := NewAgent(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// readClaimCodes reads one code per line, skipping blank lines and lines
// starting with '#'.
func readClaimCodes(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--claim-codes-file: %w", err)
	}
	defer file.Close()
	var codes []string
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		codes = append(codes, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--claim-codes-file: %w", err)
	}
	return codes, nil
}
