package app

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/oidcsignin"
	"github.com/rxc-project/rxc/adapters/postgres/migrate"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/migrations"
)

// ServeConfig is the configuration of `controlplane serve`.
type ServeConfig struct {
	PGDSN          string `envconfig:"PG_DSN" required:"true"`
	ListenAddr     string `envconfig:"LISTEN_ADDR" default:":5009"`
	GRPCListenAddr string `envconfig:"GRPC_LISTEN_ADDR" default:":5010"`
	// MetricsListenAddr serves GET /metrics apart from the public API, so
	// a scraper reaches it without the API exposing it.
	MetricsListenAddr  string        `envconfig:"METRICS_LISTEN_ADDR" default:":9091"`
	CADir              string        `envconfig:"CA_DIR" default:"ca"`
	SensorCertTTL      time.Duration `envconfig:"SENSOR_CERT_TTL" default:"168h"`
	CORSAllowedOrigins []string      `envconfig:"CORS_ALLOWED_ORIGINS" default:"http://localhost:8000"`
	LocalMode          bool          `envconfig:"LOCAL_MODE" default:"false"`
	TrustProxy         bool          `envconfig:"TRUST_PROXY" default:"false"`
	// TrustedProxies are the CIDRs (or single addresses) of the reverse
	// proxies in front of the API: X-Forwarded-For is believed only from
	// them. It takes precedence over TRUST_PROXY.
	TrustedProxies []string `envconfig:"TRUSTED_PROXIES"`
	// OperatorSecretEncryptionKey seals operators' TOTP secrets at rest
	// (32 bytes, hex or base64); without it second factors are off.
	OperatorSecretEncryptionKey string `envconfig:"OPERATOR_SECRET_ENCRYPTION_KEY"`
	// OIDC configures single sign-on (OIDC_…); off without an issuer.
	OIDC OIDCConfig `envconfig:"OIDC"`
	// LoginThrottle sets the failed-login thresholds (LOGIN_THROTTLE_…).
	LoginThrottle      LoginThrottleConfig `envconfig:"LOGIN_THROTTLE"`
	PublicGRPCAddr     string              `envconfig:"PUBLIC_GRPC_ADDR" default:"localhost:5010"`
	PublicNATSURL      string              `envconfig:"PUBLIC_NATS_URL" default:"nats://localhost:4222"`
	CommandStreamName  string              `envconfig:"COMMAND_STREAM_NAME" default:"RXC_CMD"`
	CommandTTL         time.Duration       `envconfig:"COMMAND_TTL" default:"10m"`
	SensorOfflineAfter time.Duration       `envconfig:"SENSOR_OFFLINE_AFTER" default:"90s"`
	// StreamRecheckInterval bounds how long a sensor's gRPC stream outlives
	// a revocation or renewal whose broadcast its replica missed.
	StreamRecheckInterval time.Duration `envconfig:"SENSOR_STREAM_RECHECK_INTERVAL" default:"30s"`
	// RenewMinInterval is the least time between two certificate renewals
	// of one sensor.
	RenewMinInterval time.Duration `envconfig:"SENSOR_RENEW_MIN_INTERVAL" default:"1m"`
	SessionTTL       time.Duration `envconfig:"SESSION_TTL" default:"12h"`
	RedeemPerMinute  int           `envconfig:"REDEEM_RATE_PER_MINUTE" default:"10"`
	RedeemBurst      int           `envconfig:"REDEEM_RATE_BURST" default:"5"`
	MigrateOnStart   bool          `envconfig:"MIGRATE_ON_START" default:"true"`
	ShutdownTimeout  time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"15s"`
	LogLevel         string        `envconfig:"LOG_LEVEL" default:"info"`
	// BootstrapOperatorEmail and BootstrapOperatorPassword create the first
	// operator at start when no operator with that email exists.
	BootstrapOperatorEmail    string `envconfig:"BOOTSTRAP_OPERATOR_EMAIL"`
	BootstrapOperatorPassword string `envconfig:"BOOTSTRAP_OPERATOR_PASSWORD"`

	// History retention (history.go): days each history is kept, 0 for
	// ever; EVENTS_RETENTION_DAYS is in the EVENTS_ group.
	AuditRetentionDays             int `envconfig:"AUDIT_RETENTION_DAYS" default:"400"`
	CommandHistoryRetentionDays    int `envconfig:"COMMAND_HISTORY_RETENTION_DAYS" default:"90"`
	CredentialHistoryRetentionDays int `envconfig:"CREDENTIAL_HISTORY_RETENTION_DAYS" default:"90"`
	// HistoryPruneInterval is how often a replica tries a retention pass
	// (one replica at a time makes it); 0 takes the default.
	HistoryPruneInterval time.Duration `envconfig:"HISTORY_PRUNE_INTERVAL" default:"1h"`

	Provisioner ProvisionerConfig `envconfig:"NATS_PROVISIONER"`
	Messaging   MessagingConfig   `envconfig:"NATS_MESSAGING"`
	Events      EventsConfig      `envconfig:"EVENTS"`
	Chat        ChatConfig        `envconfig:"ANALYTICS_CHAT"`
}

// OIDCConfig is the OIDC_ group: the OpenID provider operators sign in
// with (docs/authentication.md).
type OIDCConfig struct {
	IssuerURL    string `envconfig:"ISSUER_URL"`
	ClientID     string `envconfig:"CLIENT_ID"`
	ClientSecret string `envconfig:"CLIENT_SECRET"`
	RedirectURL  string `envconfig:"REDIRECT_URL"`
	Scopes       string `envconfig:"SCOPES" default:"openid email profile"`
	DisplayName  string `envconfig:"DISPLAY_NAME" default:"single sign-on"`
	GroupsClaim  string `envconfig:"GROUPS_CLAIM" default:"groups"`
	GroupMap     string `envconfig:"GROUP_MAP"`
}

// oidcProvider builds the relying party, or nil without OIDC_ISSUER_URL.
func oidcProvider(c OIDCConfig) (*oidcsignin.Provider, operators.GroupMap, error) {
	if c.IssuerURL == "" {
		return nil, nil, nil
	}
	if c.ClientID == "" || c.RedirectURL == "" {
		return nil, nil, fmt.Errorf("OIDC_ISSUER_URL is set: OIDC_CLIENT_ID and OIDC_REDIRECT_URL are required too")
	}
	groups, err := operators.ParseGroupMap(c.GroupMap)
	if err != nil {
		return nil, nil, fmt.Errorf("OIDC_GROUP_MAP: %w", err)
	}
	if len(groups) == 0 {
		return nil, nil, fmt.Errorf("OIDC_GROUP_MAP is empty: nobody could sign in with single sign-on")
	}
	p, err := oidcsignin.New(oidcsignin.Config{
		IssuerURL: c.IssuerURL, ClientID: c.ClientID, ClientSecret: c.ClientSecret, RedirectURL: c.RedirectURL,
		Scopes: strings.Fields(strings.ReplaceAll(c.Scopes, ",", " ")), GroupsClaim: c.GroupsClaim,
	})
	if err != nil {
		return nil, nil, err
	}
	return p, groups, nil
}

// LoginThrottleConfig is the LOGIN_THROTTLE_ group: failures within an
// hour before further logins are slowed, per account and address together,
// per account, and per address over all accounts (a ceiling against
// spraying, high because a corporate proxy puts everyone behind one
// address).
type LoginThrottleConfig struct {
	PairFailures    int `envconfig:"PAIR_FAILURES" default:"5"`
	AccountFailures int `envconfig:"ACCOUNT_FAILURES" default:"20"`
	AddressFailures int `envconfig:"ADDRESS_FAILURES" default:"500"`
}

// operatorSealer returns the sealer of TOTP secrets, or nil (second
// factors off) without a key.
func operatorSealer(key string) (operators.SecretSealer, error) {
	if strings.TrimSpace(key) == "" {
		return nil, nil
	}
	raw, err := seal.ParseKey(key)
	if err != nil {
		return nil, fmt.Errorf("OPERATOR_SECRET_ENCRYPTION_KEY: %w", err)
	}
	return seal.New(raw)
}

// trustedProxies parses TRUSTED_PROXIES: CIDRs, or addresses meaning
// themselves alone.
func trustedProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("TRUSTED_PROXIES: %q is neither a CIDR nor an address", s)
		}
		out = append(out, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
	}
	return out, nil
}

// ProvisionerConfig is the NATS_PROVISIONER_ group.
type ProvisionerConfig struct {
	Enabled          bool   `envconfig:"ENABLED" default:"false"`
	BaseURL          string `envconfig:"BASE_URL" default:"http://127.0.0.1:8080"`
	SharedSecret     string `envconfig:"SHARED_SECRET"`
	SharedSecretName string `envconfig:"SHARED_SECRET_HEADER_NAME" default:"X-Backend-Shared-Secret"`
	IntervalSeconds  int    `envconfig:"INTERVAL_SECONDS" default:"30"`
	TimeoutSeconds   int    `envconfig:"TIMEOUT_SECONDS" default:"5"`
	// BreakerFailures consecutive failed attempts open the circuit breaker;
	// it lets a trial call through after BreakerOpenSeconds.
	BreakerFailures    uint32 `envconfig:"BREAKER_FAILURES" default:"5"`
	BreakerOpenSeconds int    `envconfig:"BREAKER_OPEN_SECONDS" default:"30"`
}

// Interval is the reconcile period; values under 5 s are raised to 5 s.
func (p ProvisionerConfig) Interval() time.Duration {
	return time.Duration(max(p.IntervalSeconds, 5)) * time.Second
}

// MessagingConfig is the NATS_MESSAGING_ group.
type MessagingConfig struct {
	Enabled   bool   `envconfig:"ENABLED" default:"false"`
	URL       string `envconfig:"URL" default:"nats://127.0.0.1:4222"`
	CredsPath string `envconfig:"CREDS_PATH"`
}

// ChatConfig is the ANALYTICS_CHAT_ group (see analytics.go).
type ChatConfig struct {
	Enabled      bool          `envconfig:"ENABLED" default:"false"`
	BaseURL      string        `envconfig:"BASE_URL"`
	Model        string        `envconfig:"MODEL"`
	APIKey       string        `envconfig:"API_KEY"`
	Timeout      time.Duration `envconfig:"TIMEOUT" default:"60s"`
	PlaybooksDir string        `envconfig:"PLAYBOOKS_DIR"`
	// RatePerMinute bounds each operator's questions.
	RatePerMinute int              `envconfig:"RATE_PER_MINUTE" default:"10"`
	Enrichment    EnrichmentConfig `envconfig:"ENRICHMENT"`
}

// EnrichmentConfig is the ANALYTICS_CHAT_ENRICHMENT_ group.
type EnrichmentConfig struct {
	Enabled            bool          `envconfig:"ENABLED" default:"false"`
	MISPURL            string        `envconfig:"MISP_URL"`
	MISPKey            string        `envconfig:"MISP_KEY"`
	Timeout            time.Duration `envconfig:"TIMEOUT" default:"3s"`
	InsecureSkipVerify bool          `envconfig:"INSECURE_SKIP_VERIFY" default:"false"`
	// IncludePrivate also enriches private, loopback, link-local,
	// multicast and documentation addresses.
	IncludePrivate bool `envconfig:"INCLUDE_PRIVATE" default:"false"`
}

func applyMigrations(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	applied, err := migrate.Apply(ctx, pool, "controlplane", migrations.ControlPlane)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return applied, nil
}
