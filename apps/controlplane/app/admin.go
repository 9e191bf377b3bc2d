package app

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/rxc-project/rxc/adapters/passwords"
	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/x509ca"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/core/operators"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// initCAOptions are init-ca's flags.
type initCAOptions struct {
	dns, ips    listFlag
	org         string
	replaceCert bool
}

func initCAFlags() (*flag.FlagSet, *initCAOptions) {
	var o initCAOptions
	fl := flag.NewFlagSet("init-ca", flag.ContinueOnError)
	fl.Var(&o.dns, "dns", "DNS name for the gRPC server certificate (repeatable)")
	fl.Var(&o.ips, "ip", "IP address for the gRPC server certificate (repeatable)")
	fl.StringVar(&o.org, "org", "RXC", "organisation in the certificates' subjects")
	fl.BoolVar(&o.replaceCert, "replace-server-cert", false, "issue a new server certificate even when one exists (for other names, or to rotate it)")
	fl.BoolVar(&o.replaceCert, "force", false, "same as --replace-server-cert")
	return fl, &o
}

// initCA creates the sensor CA (never replacing an existing CA key) and
// issues the gRPC server certificate for the given names; an existing one is
// kept for the same names and replaced only when asked.
func initCA(args []string, stdout, stderr io.Writer) error {
	fl, o := initCAFlags()
	if err := appenv.ParseFlags(fl, "controlplane", args, stderr); err != nil {
		return err
	}
	dns, ips, org := o.dns, o.ips, &o.org
	if len(dns) == 0 && len(ips) == 0 {
		return appenv.Usagef(stderr, "controlplane", "init-ca", "give the gRPC server certificate's names with --dns and/or --ip")
	}
	opts := x509ca.InitOptions{DNSNames: dns, Organization: *org, ReplaceServerCert: o.replaceCert}
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return appenv.Usagef(stderr, "controlplane", "init-ca", "--ip %q is not an IP address", s)
		}
		opts.IPAddresses = append(opts.IPAddresses, ip)
	}
	var cfg caConfig
	if err := appenv.Load(&cfg); err != nil {
		return err
	}
	res, err := x509ca.Init(cfg.CADir, opts)
	if err != nil {
		return err
	}
	if res.CACreated {
		fmt.Fprintf(stdout, "sensor CA created: %s (valid until %s)\n", res.CACertPath, res.CANotAfter.Format(time.RFC3339))
	} else {
		fmt.Fprintf(stdout, "sensor CA kept: %s\n", res.CACertPath)
	}
	verb := "issued"
	if res.ServerKept {
		verb = "kept (same names; --replace-server-cert issues a new one)"
	}
	fmt.Fprintf(stdout, "gRPC server certificate %s: %s (valid until %s)\n", verb, res.ServerCertPath, res.ServerNotAfter.Format(time.RFC3339))
	return nil
}

// rotateCAFlags are rotate-ca's flags.
func rotateCAFlags() (*flag.FlagSet, *bool) {
	fl := flag.NewFlagSet("rotate-ca", flag.ContinueOnError)
	finish := fl.Bool("finish", false, "end the overlap: move the gRPC server certificate to the new CA and stop trusting the previous CA")
	return fl, finish
}

// rotateCA starts or finishes a sensor CA rotation in CA_DIR; a running
// control plane takes each step without a restart.
func rotateCA(args []string, stdout, stderr io.Writer) error {
	fl, finish := rotateCAFlags()
	if err := appenv.ParseFlags(fl, "controlplane", args, stderr); err != nil {
		return err
	}
	var cfg caConfig
	if err := appenv.Load(&cfg); err != nil {
		return err
	}
	if *finish {
		res, err := x509ca.FinishRotation(cfg.CADir, 0)
		if err != nil {
			return err
		}
		if res.ServerReissued {
			fmt.Fprintf(stdout, "gRPC server certificate issued by the new CA (valid until %s)\n", res.ServerNotAfter.Format(time.RFC3339))
		}
		fmt.Fprintln(stdout, "previous sensor CA removed: certificates it issued are refused from now on")
		return nil
	}
	res, err := x509ca.Rotate(cfg.CADir, x509ca.RotateOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "new sensor CA in place (valid until %s); the previous one (valid until %s) stays trusted\n",
		res.CANotAfter.Format(time.RFC3339), res.PreviousCANotAfter.Format(time.RFC3339))
	fmt.Fprintln(stdout, "sensors get certificates of the new CA and both CA certificates when they enrol or renew;")
	fmt.Fprintln(stdout, "once every sensor has renewed (one SENSOR_CERT_TTL), run: controlplane rotate-ca --finish")
	return nil
}

// operatorFlags are create-operator's flags.
type operatorFlags struct {
	email, role, tenants *string
}

func createOperatorFlags() (*flag.FlagSet, operatorFlags) {
	fl := flag.NewFlagSet("create-operator", flag.ContinueOnError)
	return fl, operatorFlags{
		email:   fl.String("email", "", "the operator's email address (required)"),
		role:    fl.String("role", string(operators.RoleAdmin), "admin (everything), operator (commands, claim codes, revocation on --tenants) or viewer (read-only on --tenants)"),
		tenants: fl.String("tenants", "", "comma-separated tenant ids granted to an operator or viewer"),
	}
}

// createOperator creates an operator; the password is the first line of stdin
// so that it never appears in a process listing or shell history.
func createOperator(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fl, f := createOperatorFlags()
	email := f.email
	if err := appenv.ParseFlags(fl, "controlplane", args, stderr); err != nil {
		return err
	}
	if *email == "" {
		return appenv.Usagef(stderr, "controlplane", "create-operator", "--email is required")
	}
	if !operators.Role(*f.role).Valid() {
		return appenv.Usagef(stderr, "controlplane", "create-operator", "--role %q: use admin, operator or viewer", *f.role)
	}
	var cfg appenv.MigrateConfig
	if err := appenv.Load(&cfg); err != nil {
		return err
	}
	line, err := bufio.NewReader(io.LimitReader(stdin, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read password from standard input: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return appenv.Usagef(stderr, "controlplane", "create-operator", "no password on standard input (pipe it in, e.g. from a secret file)")
	}
	pool, err := appenv.ConnectMigrated(ctx, cfg.PGDSN, appenv.CLILogger(stderr), applyMigrations)
	if err != nil {
		return err
	}
	defer pool.Close()
	store, err := controlplanestore.New(controlplanestore.Config{Pool: pool})
	if err != nil {
		return err
	}
	ops, err := newOperators(store, operators.Config{})
	if err != nil {
		return err
	}
	var granted []string
	for _, t := range strings.Split(*f.tenants, ",") {
		if t = strings.TrimSpace(t); t != "" {
			granted = append(granted, t)
		}
	}
	op, err := ops.CreateOperator(ctx, operators.NewOperator{Email: *email, Password: password, Role: operators.Role(*f.role), Tenants: granted})
	if errors.Is(err, operators.ErrConflict) {
		return fmt.Errorf("create-operator: an operator with the email %s already exists; nothing was changed", strings.TrimSpace(*email))
	}
	if err != nil {
		return fmt.Errorf("create-operator: %w", err)
	}
	fmt.Fprintf(stdout, "operator %s created (%s)\n", op.Email, op.Role)
	return nil
}

// newOperators builds the operators service with argon2id hashing at the
// passwords package's defaults (OWASP's recommendation).
// base carries the rest of the configuration (session lifetime, throttle,
// logger).
func newOperators(store *controlplanestore.Store, base operators.Config) (*operators.Service, error) {
	hasher, err := passwords.New(passwords.Config{})
	if err != nil {
		return nil, err
	}
	base.Store, base.Hasher = store, hasher
	return operators.New(base)
}
