package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/topology"
)

// Store is everything the Service persists. Each use case declares the
// small part it needs beside itself; adapters implement them all.
type Store interface {
	TenantStore
	TenantProvisioningStore
	ClaimStore
	RedeemStore
	EnrollStore
	SensorStore
	SensorLister
	StatusStore
	CommandStore
	BatchStore
	BatchLister
	RevokeStore
	LifecycleStore
}

// Defaults and bounds of Config.
const (
	DefaultSensorCertTTL      = 168 * time.Hour
	DefaultCommandTTL         = 10 * time.Minute
	DefaultEnrollmentTokenTTL = 15 * time.Minute
	DefaultClaimCodeTTL       = 24 * time.Hour
	MinClaimCodeTTL           = time.Minute
	MaxClaimCodeTTL           = 30 * 24 * time.Hour
	// DefaultMaxClockSkew bounds how far in the future a status report's
	// "at" may lie: a sensor with a clock running ahead would otherwise make
	// every later, correct report look stale.
	DefaultMaxClockSkew = 5 * time.Minute
	// TenantReconcileLock is the Locker name that keeps tenant reconciliation
	// to one replica at a time.
	TenantReconcileLock = "rxc-tenant-reconcile"
)

// Config wires a Service. Zero durations take the defaults above.
type Config struct {
	Store Store
	// Provisioner is required when ProvisioningEnabled is set; when it is
	// not set the Service makes no provisioner calls at all.
	Provisioner         Provisioner
	ProvisioningEnabled bool
	CA                  CertificateAuthority
	Publisher           CommandPublisher
	// Terminator ends sensors' live gRPC streams (Revocation's). It is
	// the gRPC edge, built before the Service on Status.
	Terminator SessionTerminator
	// Status is the status side the gRPC edge was built on; nil builds
	// one on Store.
	Status *StatusService
	Locker Locker
	// Stream is the command stream's name (default topology.DefaultStream).
	Stream             string
	SensorCertTTL      time.Duration
	CommandTTL         time.Duration
	EnrollmentTokenTTL time.Duration
	MaxClockSkew       time.Duration
	// MinRenewInterval is the least time between two renewals of one
	// sensor (default DefaultMinRenewInterval).
	MinRenewInterval time.Duration
	// BatchConcurrency bounds a replica's batch publications in flight
	// (default DefaultBatchConcurrency).
	BatchConcurrency int
	Logger           *slog.Logger
	Clock            func() time.Time
}

// Service implements the control plane's fleet use cases. It is cut
// along its seams, each a service of its own with only its ports:
//   - Tenants (tenants.go): tenants and their NATS accounts;
//   - Claims (claims.go): one-time claim codes and their redemption;
//   - Enrolment (enroll.go): certificates, tokens and NATS credentials;
//   - Commands (commands.go, batches.go): commands to one sensor or many,
//     their publication and settlement;
//   - StatusService (statusservice.go): status reports, health checks and
//     certificate authorisation, on its store alone, so the gRPC edge is
//     built on it before anything that needs the edge;
//   - Revocation (revocation.go): revocation and decommissioning, the only
//     part holding the session terminator.
//
// Service embeds them, so the operator API reaches every use case through
// one value, and keeps the sensor registry (reading, listing, editing
// sensors) as its own.
//
// Decisions the code makes (see also docs/architecture.md):
//   - An enrolled sensor is "offline" until its first status report or
//     health check (CheckIns) shows it alive; "online" is never assumed.
//   - The enrolment token is verified before the CA and the provisioner are
//     called but consumed only in the transaction that stores the result, so
//     a bad CSR or an unreachable provisioner leaves it usable for a retry.
//   - With NATS provisioning disabled, enrolment still issues a certificate
//     and a sensor token, without NATS credentials (Enrollment.NATS is nil);
//     with it enabled the tenant must have its account (ErrTenantNotProvisioned).
//   - A command whose publication fails stays on record with FailedAt set,
//     so the operator sees what was attempted; it never reaches the sensor.
//   - Commands are refused for pending (never enrolled) sensors: ErrNotEnrolled.
//   - A status report whose "at" lies more than MaxClockSkew ahead of the
//     server clock is refused: it would make every later report look stale.
//     Reports with the same "at" as the last applied one are applied.
//   - Revocation is local first (state, certificates, tokens, live streams),
//     then the NATS user; a failure of the latter is returned and a repeated
//     RevokeSensor retries it.
//   - A redeemed sensor is named after the claim code's sensor name, else the
//     hostname it reported, else its id.
type Service struct {
	*Tenants
	*Claims
	*Enrolment
	*Commands
	*StatusService
	*Revocation

	// store is the sensor registry's part: reading, listing and editing
	// sensors are Service's own use cases.
	store RegistryPorts
	clocked
}

// clocked is the logger and clock every part of the fleet shares.
type clocked struct {
	log   *slog.Logger
	clock func() time.Time
}

// newClocked defaults a nil logger to one that discards and a nil clock
// to time.Now.
func newClocked(log *slog.Logger, clock func() time.Time) clocked {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if clock == nil {
		clock = time.Now
	}
	return clocked{log: log, clock: clock}
}

// now is the clock at PostgreSQL's precision, so stored and returned values
// compare equal.
func (c clocked) now() time.Time { return c.clock().UTC().Truncate(time.Microsecond) }

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.CA == nil || cfg.Publisher == nil || cfg.Terminator == nil || cfg.Locker == nil {
		return nil, errors.New("fleet: store, CA, publisher, terminator and locker are required")
	}
	if cfg.ProvisioningEnabled && cfg.Provisioner == nil {
		return nil, errors.New("fleet: provisioning is enabled but no provisioner is configured")
	}
	if cfg.Stream == "" {
		cfg.Stream = topology.DefaultStream
	}
	if err := ids.Validate(cfg.Stream); err != nil {
		return nil, fmt.Errorf("fleet: stream name: %w", err)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&cfg.SensorCertTTL, DefaultSensorCertTTL},
		{&cfg.CommandTTL, DefaultCommandTTL},
		{&cfg.EnrollmentTokenTTL, DefaultEnrollmentTokenTTL},
		{&cfg.MaxClockSkew, DefaultMaxClockSkew},
		{&cfg.MinRenewInterval, DefaultMinRenewInterval},
	} {
		if *d.v < 0 {
			return nil, errors.New("fleet: durations must not be negative")
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.BatchConcurrency < 0 {
		return nil, errors.New("fleet: negative batch concurrency")
	}
	if cfg.BatchConcurrency == 0 {
		cfg.BatchConcurrency = DefaultBatchConcurrency
	}
	base := newClocked(cfg.Logger, cfg.Clock)
	status := cfg.Status
	if status == nil {
		var err error
		if status, err = NewStatusService(StatusConfig{Store: cfg.Store, MaxClockSkew: cfg.MaxClockSkew, Logger: base.log, Clock: base.clock}); err != nil {
			return nil, err
		}
	}
	revocation, err := NewRevocation(RevocationConfig{
		Store: cfg.Store, Provisioner: cfg.Provisioner, ProvisioningEnabled: cfg.ProvisioningEnabled,
		Terminator: cfg.Terminator, Logger: base.log, Clock: base.clock,
	})
	if err != nil {
		return nil, err
	}
	return &Service{
		StatusService: status, Revocation: revocation,
		Enrolment: &Enrolment{
			store: cfg.Store, ca: cfg.CA, provisioner: cfg.Provisioner, provisioning: cfg.ProvisioningEnabled,
			certTTL: cfg.SensorCertTTL, minRenew: cfg.MinRenewInterval, clocked: base,
		},
		Commands: &Commands{
			store: cfg.Store, publisher: cfg.Publisher, commandTTL: cfg.CommandTTL, maxSkew: cfg.MaxClockSkew,
			batchConcurrency: cfg.BatchConcurrency, wake: make(chan struct{}, 1), clocked: base,
		},
		Tenants: &Tenants{
			store: cfg.Store, provisioner: cfg.Provisioner, provisioning: cfg.ProvisioningEnabled,
			locker: cfg.Locker, clocked: base,
		},
		Claims: &Claims{store: cfg.Store, enrollmentTTL: cfg.EnrollmentTokenTTL, clocked: base},
		store:  cfg.Store, clocked: base,
	}, nil
}

// validateLabel checks a human-readable name: bounded, printable.
func validateLabel(what, v string, maxRunes int) error {
	n := 0
	for _, r := range v {
		n++
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return fmt.Errorf("%w: %s contains a control or invalid character", ErrInvalidInput, what)
		}
	}
	if n > maxRunes {
		return fmt.Errorf("%w: %s longer than %d characters", ErrInvalidInput, what, maxRunes)
	}
	return nil
}

func validateID(what, id string) error {
	if err := ids.Validate(id); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidInput, what, err)
	}
	return nil
}

// readValid validates id (validateID, naming it what) and only then reads
// the record it names.
func readValid[T any](ctx context.Context, what, id string, read func(context.Context, string) (T, error)) (T, error) {
	if err := validateID(what, id); err != nil {
		var zero T
		return zero, err
	}
	return read(ctx, id)
}
