package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/apps/internal/appenv"
	"github.com/rxc-project/rxc/migrations"
)

// StoreConfig is shared by every subcommand that touches the store.
type StoreConfig struct {
	PGDSN                    string `envconfig:"PG_DSN" required:"true"`
	OperatorSeedPath         string `envconfig:"OPERATOR_SEED_PATH" required:"true"`
	AccountSeedEncryptionKey string `envconfig:"ACCOUNT_SEED_ENCRYPTION_KEY" required:"true"`
	ControlAccountName       string `envconfig:"CONTROL_ACCOUNT_NAME" default:"CONTROL"`
	CommandStreamName        string `envconfig:"COMMAND_STREAM_NAME" default:"RXC_CMD"`
	ControlJSMaxDisk         int64  `envconfig:"CONTROL_JETSTREAM_MAX_DISK" default:"10737418240"`
	ControlJSMaxMemory       int64  `envconfig:"CONTROL_JETSTREAM_MAX_MEMORY" default:"268435456"`
	LogLevel                 string `envconfig:"LOG_LEVEL" default:"info"`
}

// ServeConfig is the configuration of `provisioner serve`.
type ServeConfig struct {
	StoreConfig
	ListenAddr string `envconfig:"LISTEN_ADDR" default:":8080"`
	// SharedSecret is BACKEND_SHARED_SECRET; SharedSecretAlias is
	// SHARED_SECRET, the name earlier releases read. Either may be set, both
	// only to the same value (LoadServeConfig resolves them).
	SharedSecret               string        `envconfig:"BACKEND_SHARED_SECRET" desc:"required (or its alias SHARED_SECRET), at least 16 characters"`
	SharedSecretAlias          string        `envconfig:"SHARED_SECRET" desc:"alias of BACKEND_SHARED_SECRET"`
	NATSURL                    string        `envconfig:"NATS_URL" default:"nats://127.0.0.1:4222"`
	ControlCredsPath           string        `envconfig:"CONTROL_CREDS_PATH"`
	StartupEnsureCommandStream bool          `envconfig:"STARTUP_ENSURE_COMMAND_STREAM" default:"false"`
	CommandStreamReplicas      int           `envconfig:"COMMAND_STREAM_REPLICAS" default:"1"`
	CommandStreamMaxAge        time.Duration `envconfig:"COMMAND_STREAM_MAX_AGE" default:"168h"`
	CommandStreamRetention     string        `envconfig:"COMMAND_STREAM_RETENTION" default:"workqueue"`
	// CommandConsumerReplicas is each sensor consumer's replicas; 0: the
	// stream's. 1 on a three-node cluster with limits retention is the
	// shape deploy/ ships (docs/operations.md, "Cluster shape").
	CommandConsumerReplicas   int   `envconfig:"COMMAND_CONSUMER_REPLICAS" default:"0" desc:"replicas of each sensor's consumer (0: COMMAND_STREAM_REPLICAS); below the stream's only with COMMAND_STREAM_RETENTION=limits, and then a consumer whose node is lost is recreated on a live node"`
	CommandStreamMaxPerSensor int64 `envconfig:"COMMAND_STREAM_MAX_PER_SENSOR" default:"64"`
	// CommandStreamMaxConsumers is the stream's consumer limit, one
	// consumer per sensor. nats-server 2.15+ caps a stream without one at
	// 1,000.
	CommandStreamMaxConsumers int `envconfig:"COMMAND_STREAM_MAX_CONSUMERS" default:"1000000"`
	// CommandStreamWorkQueueWarnConsumers: above this many consumers a
	// work-queue or interest command stream is reported (log and metric);
	// 0 turns the warning off. On the machine of docs/benchmarks.md one
	// command to each of 1,000 sensors of a work-queue stream is
	// acknowledged within about half a second, and the time grows with the
	// square of the fleet (about 4 s at 3,000, a minute at 9,000).
	CommandStreamWorkQueueWarnConsumers int           `envconfig:"COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS" default:"1000" desc:"warn when a workqueue or interest command stream holds more consumers (sensors); 0: never"`
	ConsumerAckWait                     time.Duration `envconfig:"CONSUMER_ACK_WAIT" default:"30s"`
	// EventsStreamName is the alert event stream; empty means
	// topology.DefaultEventStream. Zero max age or bytes leave that limit off.
	EventsStreamName     string        `envconfig:"EVENTS_STREAM_NAME" default:"RXC_EVENTS"`
	EventsStreamMaxAge   time.Duration `envconfig:"EVENTS_STREAM_MAX_AGE" default:"72h"`
	EventsStreamMaxBytes int64         `envconfig:"EVENTS_STREAM_MAX_BYTES" default:"8589934592"`
	EventsStreamReplicas int           `envconfig:"EVENTS_STREAM_REPLICAS" default:"1"`
	ResolverCacheTTL     time.Duration `envconfig:"RESOLVER_CACHE_TTL" default:"5s"`
	// SensorUserJWTTTL is how long a sensor's NATS user JWT is valid from
	// its enrolment or last certificate renewal; 0 issues JWTs that never
	// expire.
	SensorUserJWTTTL time.Duration `envconfig:"SENSOR_USER_JWT_TTL" default:"336h" desc:"lifetime of a sensor's NATS user JWT from its enrolment or last renewal (0: no expiry); keep it above the control plane's SENSOR_CERT_TTL"`
	// AccountJWTMaxBytes bounds a tenant's account JWT; a revocation that
	// would outgrow it re-issues the tenant (one "*" entry, new users for
	// its sensors at their next request). Negative: no bound.
	AccountJWTMaxBytes int `envconfig:"ACCOUNT_JWT_MAX_BYTES" default:"65536" desc:"largest tenant account JWT in bytes (revocations included); beyond it the tenant is re-issued with one tenant-wide revocation and its sensors get new users when they next ask (-1: no bound; keep it well under nats-server's max_payload)"`
	// ResolverSnapshotPath is the local file holding the last known JWT of
	// every account, from which the resolver answers while PostgreSQL is
	// unreachable (also after a restart); empty keeps the copy in memory.
	ResolverSnapshotPath     string        `envconfig:"RESOLVER_SNAPSHOT_PATH"`
	ResolverSnapshotInterval time.Duration `envconfig:"RESOLVER_SNAPSHOT_INTERVAL" default:"30s"`
	MigrateOnStart           bool          `envconfig:"MIGRATE_ON_START" default:"true"`
	ShutdownTimeout          time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"15s"`
}

// LoadServeConfig reads the configuration of `provisioner serve` from the
// environment and resolves the shared secret's alias.
func LoadServeConfig() (ServeConfig, error) {
	var cfg ServeConfig
	if err := appenv.Load(&cfg); err != nil {
		// The shared secret is required under either of its names, which
		// envconfig cannot say: name it with the others.
		var missing *appenv.MissingError
		if errors.As(err, &missing) && os.Getenv("BACKEND_SHARED_SECRET") == "" && os.Getenv("SHARED_SECRET") == "" {
			missing.Names = append(missing.Names, "BACKEND_SHARED_SECRET")
		}
		return cfg, err
	}
	if err := cfg.resolveSecret(); err != nil {
		return cfg, err
	}
	if cfg.CommandStreamWorkQueueWarnConsumers < 0 {
		return cfg, errors.New("configuration: COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS must be a number of consumers, or 0 to turn the warning off")
	}
	return cfg, nil
}

// resolveSecret fills SharedSecret from its alias SHARED_SECRET and checks
// it. Two different values are refused rather than one silently winning.
func (c *ServeConfig) resolveSecret() error {
	switch {
	case c.SharedSecret == "" && c.SharedSecretAlias == "":
		return errors.New("configuration: required key BACKEND_SHARED_SECRET missing value")
	case c.SharedSecret == "":
		c.SharedSecret = c.SharedSecretAlias
	case c.SharedSecretAlias != "" && c.SharedSecretAlias != c.SharedSecret:
		return errors.New("configuration: BACKEND_SHARED_SECRET and its alias SHARED_SECRET are both set, to different values: set one")
	}
	c.SharedSecretAlias = ""
	if len(c.SharedSecret) < 16 {
		return errors.New("configuration: BACKEND_SHARED_SECRET must be at least 16 characters")
	}
	return nil
}

// sealer parses ACCOUNT_SEED_ENCRYPTION_KEY.
func (c StoreConfig) sealer() (*seal.Sealer, error) {
	key, err := seal.ParseKey(c.AccountSeedEncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("configuration: ACCOUNT_SEED_ENCRYPTION_KEY: %w", err)
	}
	return seal.New(key)
}

func applyMigrations(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	applied, err := migrate.Apply(ctx, pool, "provisioner", migrations.Provisioner)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return applied, nil
}
