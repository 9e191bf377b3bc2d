// Package appenv holds what RXC's binaries share when they start: reading
// configuration from the environment (envconfig) with messages that name the
// variable, the JSON logger, a PostgreSQL pool that waits for the database
// so a service can start together with it, and the `migrate` subcommand.
package appenv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/kelseyhightower/envconfig"

	"github.com/rxc-project/rxc/apps/internal/appmain"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// Load fills cfg (a pointer to a struct with envconfig tags) from the
// environment. Every required variable that is unset is named at once.
func Load(cfg any) error {
	missing, err := Missing(cfg)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &MissingError{Names: missing}
	}
	if err := envconfig.Process("", cfg); err != nil {
		return configError(err)
	}
	return nil
}

// configError names the variable envconfig could not read, never the Go field, and never the
// value (it may be a secret).
func configError(err error) error {
	var pe *envconfig.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("configuration: %s", strings.TrimPrefix(err.Error(), "envconfig."))
	}
	want := map[string]string{
		"time.Duration": "a duration such as 90s, 15m or 168h",
		"bool":          "true or false",
		"int":           "a whole number", "int64": "a whole number", "int32": "a whole number",
		"uint": "a whole number of zero or more", "uint64": "a whole number of zero or more", "uint32": "a whole number of zero or more",
		"float64": "a number",
	}[pe.TypeName]
	if want == "" {
		want = "a valid " + pe.TypeName
	}
	return fmt.Errorf("configuration: %s is not %s (-h lists every variable)", pe.KeyName, want)
}

// MissingError names the required variables that are unset.
type MissingError struct {
	Names []string
}

func (e *MissingError) Error() string {
	if len(e.Names) == 1 {
		return fmt.Sprintf("configuration: required variable %s is not set (-h lists every variable)", e.Names[0])
	}
	return fmt.Sprintf("configuration: required variables %s are not set (-h lists every variable)", strings.Join(e.Names, ", "))
}

// Missing lists the required variables of cfg (required:"true" and no
// default) that are absent from the environment, as envconfig decides it.
func Missing(cfg any) ([]string, error) {
	vars, err := Variables(cfg)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vars {
		if !v.Required || v.Default != "" {
			continue
		}
		if _, ok := os.LookupEnv(v.Key); ok {
			continue
		}
		if v.Alt != "" {
			if _, ok := os.LookupEnv(v.Alt); ok {
				continue
			}
		}
		out = append(out, v.Key)
	}
	return out, nil
}

// Variable is one environment variable of a configuration struct.
type Variable struct {
	Key, Alt, Type, Default, Description string
	Required                             bool
}

// Variables lists the environment variables cfg reads, in field order.
func Variables(cfg any) ([]Variable, error) {
	// envconfig keeps its field walk private; its usage template sees it.
	tmpl := template.Must(template.New("vars").Parse(
		`{{range .}}{{.Key}}{{"\x1f"}}{{.Alt}}{{"\x1f"}}{{.Field.Type}}{{"\x1f"}}{{.Tags.Get "default"}}{{"\x1f"}}{{.Tags.Get "required"}}{{"\x1f"}}{{.Tags.Get "desc"}}{{"\x1e"}}{{end}}`))
	var buf bytes.Buffer
	if err := envconfig.Usaget("", cfg, &buf, tmpl); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	var out []Variable
	for _, rec := range strings.Split(buf.String(), "\x1e") {
		if rec == "" {
			continue
		}
		f := strings.Split(rec, "\x1f")
		if len(f) != 6 {
			return nil, fmt.Errorf("configuration: unexpected usage record %q", rec)
		}
		req, _ := strconv.ParseBool(f[4])
		out = append(out, Variable{Key: f[0], Alt: f[1], Type: f[2], Default: f[3], Required: req, Description: f[5]})
	}
	return out, nil
}

// Help writes a subcommand's help to w: usage (its first line and what it
// does), its flags when fl is not nil, and the environment variables of
// each spec (a pointer to a configuration struct).
func Help(w io.Writer, usage string, fl *flag.FlagSet, specs ...any) error {
	fmt.Fprintln(w, strings.TrimRight(usage, "\n"))
	if fl != nil {
		var flags bytes.Buffer
		fl.SetOutput(&flags)
		fl.PrintDefaults()
		if flags.Len() > 0 {
			fmt.Fprintf(w, "\nflags:\n%s", flags.String())
		}
	}
	seen := map[string]bool{}
	var vars []Variable
	for _, spec := range specs {
		vs, err := Variables(spec)
		if err != nil {
			return err
		}
		for _, v := range vs {
			if !seen[v.Key] {
				seen[v.Key] = true
				vars = append(vars, v)
			}
		}
	}
	if len(vars) == 0 {
		fmt.Fprintln(w, "\nenvironment: none")
		return nil
	}
	fmt.Fprintln(w, "\nenvironment (the configuration tables in docs/provisioner.md and docs/controlplane.md say what each means):")
	tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT")
	for _, v := range vars {
		def := v.Default
		switch {
		case v.Required && def == "":
			def = "(required)"
		case def == "":
			def = "-"
		}
		line := "  " + v.Key + "\t" + def
		if v.Description != "" {
			line += "\t" + v.Description
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// Logger returns a JSON logger at level (debug, info, warn or error).
func Logger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("configuration: LOG_LEVEL %q: use debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// Connect opens a pool on dsn and waits up to wait for PostgreSQL to answer,
// logging each failed attempt (at most one line every few seconds) so that
// an unreachable database is never silence. The password never appears.
func Connect(ctx context.Context, dsn string, wait time.Duration, log *slog.Logger) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parser's message may quote the DSN, password included.
		return nil, errors.New("configuration: PG_DSN is not a valid PostgreSQL connection string")
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	target := fmt.Sprintf("%s:%d/%s", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, pcfg.ConnConfig.Database)
	start := time.Now()
	deadline := start.Add(wait)
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = pool.Ping(pctx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("postgres answered", "postgres", target, "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return pool, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres at %s did not answer within %s (%d attempts): %w", target, wait, attempt, err)
		}
		if attempt == 1 || time.Since(lastLog) >= 5*time.Second {
			lastLog = time.Now()
			log.Warn("postgres not reachable yet; retrying", "postgres", target, "attempt", attempt,
				"gives_up_in", time.Until(deadline).Round(time.Second).String(), logkey.Error, err.Error())
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// CLILogger is the logger of the one-shot subcommands (init-operator,
// migrate, create-operator): text lines on w.
func CLILogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// MigrateConfig is what `migrate` reads.
type MigrateConfig struct {
	PGDSN string `envconfig:"PG_DSN" required:"true"`
}

// Migrate is the `migrate` subcommand: it connects to PG_DSN, runs apply
// and prints what it applied.
func Migrate(ctx context.Context, stdout, stderr io.Writer, apply func(context.Context, *pgxpool.Pool) ([]string, error)) error {
	var cfg MigrateConfig
	if err := Load(&cfg); err != nil {
		return err
	}
	pool, err := Connect(ctx, cfg.PGDSN, 30*time.Second, CLILogger(stderr))
	if err != nil {
		return err
	}
	defer pool.Close()
	applied, err := apply(ctx, pool)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "schema is up to date")
	}
	for _, v := range applied {
		fmt.Fprintln(stdout, "applied", v)
	}
	return nil
}

// ConnectMigrated is what every command that works on a service's database
// starts with: a pool on dsn that waits up to 30 s for the database
// (telling log how it goes), with apply's migrations applied. The caller
// closes the pool.
func ConnectMigrated(ctx context.Context, dsn string, log *slog.Logger, apply func(context.Context, *pgxpool.Pool) ([]string, error)) (*pgxpool.Pool, error) {
	pool, err := Connect(ctx, dsn, 30*time.Second, log)
	if err != nil {
		return nil, err
	}
	if _, err := apply(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// ErrUsage is a command line already explained on standard error; Exit
// answers it with exit status 2.
var ErrUsage = errors.New("usage")

// ParseFlags parses a subcommand's flags for binary; the subcommand takes no
// positional arguments. Mistakes are explained on stderr in Usagef's one
// style (not the flag package's, which dumps every flag) and returned as
// ErrUsage.
func ParseFlags(fl *flag.FlagSet, binary string, args []string, stderr io.Writer) error {
	fl.SetOutput(io.Discard)
	if err := fl.Parse(args); err != nil {
		return Usagef(stderr, binary, fl.Name(), "%v", err)
	}
	if fl.NArg() > 0 {
		return Usagef(stderr, binary, fl.Name(), "unexpected argument %q", fl.Arg(0))
	}
	return nil
}

// Usagef explains a mistake in a command line on stderr, as
// "binary command: what (-h for help)", and returns ErrUsage, which Exit
// answers with status 2. Commands call it before they write anything.
func Usagef(stderr io.Writer, binary, command, format string, args ...any) error {
	fmt.Fprintf(stderr, "%s %s: %s (-h for help)\n", binary, command, fmt.Sprintf(format, args...))
	return ErrUsage
}

// Exit is the exit status for a command's outcome: 0 on success, 2 for
// ErrUsage (already explained), else 1 after printing "binary: err" on
// stderr.
func Exit(binary string, err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return 2
	default:
		fmt.Fprintln(stderr, binary+":", err)
		return 1
	}
}

// Command is one subcommand as its -h shows it: Text's first line is the
// usage, then what it does; Flags (nil for a command without flags) builds
// its flag set; Specs are the configuration structs whose environment
// variables it reads.
type Command struct {
	Text  string
	Flags func() *flag.FlagSet
	Specs []any
}

// Dispatch does what every binary's Run does before running a command:
// usage without arguments, `help`/`-h`, the `--version` alias, unknown
// commands, a command's -h, and stray arguments to a command without flags.
// It returns the command to run, or done with the exit code when Run must
// return at once.
func Dispatch(binary, usage string, commands map[string]Command, args []string, stdout, stderr io.Writer) (cmd string, code int, done bool) {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return "", 2, true
	}
	cmd = args[0]
	switch cmd {
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return "", 0, true
	case "--version", "-v":
		cmd = "version"
	}
	c, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", binary, cmd, usage)
		return "", 2, true
	}
	if appmain.WantsHelp(args[1:]) {
		var fl *flag.FlagSet
		if c.Flags != nil {
			fl = c.Flags()
		}
		if err := Help(stdout, c.Text, fl, c.Specs...); err != nil {
			fmt.Fprintln(stderr, binary+":", err)
			return "", 1, true
		}
		return "", 0, true
	}
	if c.Flags == nil && len(args) > 1 {
		_ = Usagef(stderr, binary, cmd, "unexpected argument %q (it takes none)", args[1])
		return "", 2, true
	}
	return cmd, 0, false
}
