// Package controlapi is the control plane's HTTP edge (served on :5009): the
// operators' session-cookie API the SPA uses (tenants, claim codes, sensors,
// commands, revocation, analytics and chat), the sensors' public routes (claim code
// redemption, enrolment and renewal with bearer tokens; package sensorapi,
// mounted here with this API's audit trail and problems), and liveness,
// readiness and Prometheus metrics. It validates input at the edge, calls the
// fleet and operators services, and maps their errors to RFC 9457 problems in
// one function (fail); the business rules stay in core.
//
// Decisions where the contract leaves room:
//   - State-changing operator and login requests pass the origin check when
//     Origin (else the Referer's origin) is an allowed origin or the API's
//     own host; with neither header they pass unless Sec-Fetch-Site says
//     cross-site. "null" origins are refused.
//   - The redeem limiter, the login throttle and the audit trail key on the
//     peer address, or, from a peer in TrustedProxies, on the rightmost
//     X-Forwarded-For entry that is not a trusted proxy (with TrustProxy
//     alone: the last entry); IPv6 counts per /64. The limiter's table is
//     bounded and fails closed when full.
//   - Commands are refused with messaging disabled before anything is
//     recorded; with NATS unreachable the core records the failed command.
//   - A revocation whose NATS part fails answers 503 nats_revoke_pending
//     (with Retry-After): the sensor is revoked locally and repeating the
//     call retries the NATS part.
//   - sensor_revoked is 403 on the sensors' own routes and 409 on the
//     operators' routes.
//   - Renewal answers sensorId and the certificate fields (certificate,
//     caCertificate, serial, notAfter); it issues no new sensor token.
//   - The analytics chat refuses with a problem before its event stream
//     starts (limits, unknown tenant, chat off, rate limit per operator);
//     a failure after that is an `error` event carrying the problem's code.
//     The tenant must exist for the overview and the chat.
package controlapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/sensorapi"
	"github.com/rxc-project/rxc/adapters/httpapi/statusrec"
	"github.com/rxc-project/rxc/adapters/oidcsignin"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/problem"
)

// MaxBodyBytes is the largest request body accepted (64 KiB).
const MaxBodyBytes = 64 << 10

// SessionCookie is the name of the operators' session cookie.
const SessionCookie = "rxc_session"

// Defaults of Config.
const (
	DefaultRedeemPerMinute  = 10
	DefaultRedeemBurst      = 5
	DefaultReadinessTimeout = 2 * time.Second
	DefaultChatPerMinute    = 10
)

// Check is one readiness check; GET /readyz fails while any Fn fails.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// RateLimit is a token bucket per client address: Burst attempts at once,
// refilled at PerMinute per minute.
type RateLimit struct {
	PerMinute int
	Burst     int
}

// Config wires the API.
type Config struct {
	Fleet     *fleet.Service
	Operators *operators.Service
	// CACertificatePEM returns the sensor CA certificate sent with renewed
	// certificates (enrolment takes it from the fleet's result).
	CACertificatePEM func() []byte
	// PublicNATSURL and PublicGRPCAddr are the addresses enrolment tells
	// sensors to dial.
	PublicNATSURL  string
	PublicGRPCAddr string
	// AllowedOrigins are the exact browser origins (scheme://host[:port])
	// allowed to call the operator routes with credentials.
	AllowedOrigins []string
	// LocalMode drops the Secure attribute of the session cookie, for plain
	// http on localhost.
	LocalMode bool
	// TrustProxy takes the client address for rate limiting from the last
	// X-Forwarded-For entry (the one the trusted proxy appended), whoever
	// the peer; only safe where nothing but the proxy reaches the API.
	// TrustedProxies, when set, takes precedence.
	TrustProxy bool
	// TrustedProxies are the networks of the reverse proxies in front of
	// the API: X-Forwarded-For is believed only from a peer in them.
	TrustedProxies []netip.Prefix
	// Analytics serves the analytics overview and the chat, and reports
	// the chat's live status; without it those routes answer 503.
	Analytics *analytics.Service
	// ChatRate limits chat questions per operator (default 10 per
	// minute, burst 10).
	ChatRate            RateLimit
	ProvisioningEnabled bool
	MessagingEnabled    bool
	Readiness           []Check
	// ReadinessTimeout bounds each readiness check (default 2 s).
	ReadinessTimeout time.Duration
	// Metrics, when set, appends the application's own Prometheus text to
	// GET /metrics.
	Metrics func(w io.Writer)
	// RedeemRate limits claim code redemptions per client address
	// (default 10 per minute, burst 5).
	RedeemRate RateLimit
	// DatabaseUnavailable reports whether an error means the database
	// could not be reached; such requests answer 503 database_unavailable
	// with Retry-After instead of 500. Default: never.
	DatabaseUnavailable func(error) bool
	// OIDC, when set, offers single sign-on (GET /api/auth/oidc/login and
	// /callback); OIDCDisplayName names the provider on the console's
	// button and OIDCGroups maps its groups to roles and tenants.
	OIDC            *oidcsignin.Provider
	OIDCDisplayName string
	OIDCGroups      operators.GroupMap
	// ConsoleURL is where a single sign-on ends (default: the first
	// allowed origin, else "/").
	ConsoleURL string
	// Audit records every state-changing request and every login; nil
	// records nothing (tests of other concerns).
	Audit  *audit.Service
	Logger *slog.Logger
	Clock  func() time.Time
}

// API is the control plane's http.Handler.
type API struct {
	fleet          *fleet.Service
	operators      *operators.Service
	sensors        *sensorapi.Routes
	origins        map[string]bool
	localMode      bool
	trustProxy     proxyTrust
	analytics      *analytics.Service
	chatLimiter    *limiter
	provisioning   bool
	messaging      bool
	readiness      []Check
	readyTimeout   time.Duration
	extraMetrics   func(io.Writer)
	redeemLimiter  *limiter
	errorTable     []errorRule
	audit          *audit.Service
	oidc           *oidcsignin.Provider
	oidcName       string
	oidcGroups     operators.GroupMap
	consoleURL     string
	loginFailures  atomic.Int64
	auditGuard     *auditGuard
	openAPIDoc     []byte
	patterns       []string
	log            *slog.Logger
	clock          func() time.Time
	mux            *http.ServeMux
	requestMetrics requestMetrics
}

// New checks cfg and returns the API.
func New(cfg Config) (*API, error) {
	if cfg.Fleet == nil || cfg.Operators == nil || cfg.CACertificatePEM == nil {
		return nil, errors.New("controlapi: fleet, operators and CACertificatePEM are required")
	}
	if cfg.ProvisioningEnabled && cfg.PublicNATSURL == "" {
		return nil, errors.New("controlapi: PublicNATSURL is required when provisioning is enabled")
	}
	origins := make(map[string]bool, len(cfg.AllowedOrigins))
	for _, o := range cfg.AllowedOrigins {
		canon, ok := canonicalOrigin(o)
		if !ok {
			return nil, errors.New("controlapi: allowed origin " + o + " is not scheme://host[:port]")
		}
		origins[canon] = true
	}
	for _, c := range cfg.Readiness {
		if c.Name == "" || c.Fn == nil {
			return nil, errors.New("controlapi: every readiness check needs a name and a function")
		}
	}
	rate := cfg.RedeemRate
	if rate.PerMinute < 0 || rate.Burst < 0 {
		return nil, errors.New("controlapi: negative redeem rate limit")
	}
	if rate.PerMinute == 0 {
		rate.PerMinute = DefaultRedeemPerMinute
	}
	if rate.Burst == 0 {
		rate.Burst = DefaultRedeemBurst
	}
	chatRate := cfg.ChatRate
	if chatRate.PerMinute <= 0 {
		chatRate.PerMinute = DefaultChatPerMinute
	}
	if chatRate.Burst <= 0 {
		chatRate.Burst = chatRate.PerMinute
	}
	if cfg.ReadinessTimeout <= 0 {
		cfg.ReadinessTimeout = DefaultReadinessTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.DatabaseUnavailable == nil {
		cfg.DatabaseUnavailable = func(error) bool { return false }
	}
	a := &API{
		fleet: cfg.Fleet, operators: cfg.Operators,
		origins: origins, localMode: cfg.LocalMode, trustProxy: proxyTrust{any: cfg.TrustProxy, nets: slices.Clone(cfg.TrustedProxies)},
		analytics: cfg.Analytics, chatLimiter: newLimiter(chatRate, cfg.Clock), provisioning: cfg.ProvisioningEnabled, messaging: cfg.MessagingEnabled,
		readiness: slices.Clone(cfg.Readiness), readyTimeout: cfg.ReadinessTimeout,
		extraMetrics:  cfg.Metrics,
		redeemLimiter: newLimiter(rate, cfg.Clock), errorTable: errorTable(cfg.DatabaseUnavailable), audit: cfg.Audit,
		log: cfg.Logger, clock: cfg.Clock, auditGuard: newAuditGuard(cfg.Clock),
		mux: http.NewServeMux(),
	}
	sensors, err := sensorapi.New(sensorapi.Config{
		Fleet: cfg.Fleet, Host: sensorHost{a}, CACertificatePEM: cfg.CACertificatePEM,
		PublicNATSURL: cfg.PublicNATSURL, PublicGRPCAddr: cfg.PublicGRPCAddr,
	})
	if err != nil {
		return nil, err
	}
	a.sensors = sensors
	doc, err := OpenAPI()
	if err != nil {
		return nil, err
	}
	a.openAPIDoc = doc
	a.oidc, a.oidcName, a.oidcGroups, a.consoleURL = cfg.OIDC, cfg.OIDCDisplayName, cfg.OIDCGroups, cfg.ConsoleURL
	if a.oidcName == "" {
		a.oidcName = "single sign-on"
	}
	if a.consoleURL == "" {
		a.consoleURL = "/"
		if len(cfg.AllowedOrigins) > 0 {
			a.consoleURL = strings.TrimSuffix(cfg.AllowedOrigins[0], "/") + "/"
		}
	}
	a.routes()
	return a, nil
}

func (a *API) routes() {
	m := routeRecorder{mux: a.mux, patterns: &a.patterns}
	m.HandleFunc("GET /healthz", a.healthz)
	m.HandleFunc("GET /readyz", a.readyz)
	m.HandleFunc("GET /api/openapi.json", a.openAPI)

	m.HandleFunc("POST /api/auth/login", a.audited("auth.login", a.sameOrigin(a.login)))
	m.HandleFunc("POST /api/auth/logout", a.audited("auth.logout", a.sameOrigin(a.logout)))
	m.HandleFunc("GET /api/auth/me", a.operator(a.me))
	m.HandleFunc("GET /api/auth/providers", a.providers)
	m.HandleFunc("GET /api/auth/oidc/login", a.withOIDC(a.oidcLogin))
	m.HandleFunc("GET /api/auth/oidc/callback", a.withOIDC(a.audited("auth.oidc", a.oidcCallback)))
	m.HandleFunc("POST /api/auth/me/totp", a.audited("auth.totp_begin", a.operator(a.beginTOTP)))
	m.HandleFunc("POST /api/auth/me/totp/confirm", a.audited("auth.totp_enable", a.operator(a.confirmTOTP)))
	m.HandleFunc("GET /api/auth/settings", a.operator(a.getAuthSettings))
	m.HandleFunc("PATCH /api/auth/settings", a.audited("auth.settings", a.operator(a.patchAuthSettings)))

	m.HandleFunc("GET /api/tenants", a.operator(a.listTenants))
	m.HandleFunc("POST /api/tenants", a.audited("tenant.create", a.operator(a.createTenant)))
	m.HandleFunc("GET /api/tenants/{id}", a.operator(a.getTenant))
	m.HandleFunc("DELETE /api/tenants/{id}", a.audited("tenant.delete", a.operator(a.deleteTenant)))
	m.HandleFunc("POST /api/tenants/{id}/claim-codes", a.audited("claim_code.issue", a.operator(a.issueClaimCode)))
	m.HandleFunc("GET /api/tenants/{id}/claim-codes", a.operator(a.listClaimCodes))
	m.HandleFunc("DELETE /api/claim-codes/{id}", a.audited("claim_code.revoke", a.operator(a.revokeClaimCode)))
	m.HandleFunc("GET /api/sensors", a.operator(a.listSensors))
	m.HandleFunc("GET /api/sensors/summary", a.operator(a.sensorSummary))
	m.HandleFunc("POST /api/commands", a.audited("command.batch", a.operator(a.createBatch)))
	m.HandleFunc("GET /api/commands/batches", a.operator(a.listBatches))
	m.HandleFunc("GET /api/commands/batches/{id}", a.operator(a.getBatch))
	m.HandleFunc("GET /api/sensors/{id}", a.operator(a.getSensor))
	m.HandleFunc("PATCH /api/sensors/{id}", a.audited("sensor.update", a.operator(a.patchSensor)))
	m.HandleFunc("DELETE /api/sensors/{id}", a.audited("sensor.decommission", a.operator(a.decommissionSensor)))
	m.HandleFunc("POST /api/sensors/{id}/commands", a.audited("sensor.command", a.operator(a.issueCommand)))
	m.HandleFunc("GET /api/sensors/{id}/commands", a.operator(a.listCommands))
	m.HandleFunc("POST /api/sensors/{id}/revoke", a.audited("sensor.revoke", a.operator(a.revokeSensor)))
	m.HandleFunc("GET /api/analytics/chat/status", a.operator(a.chatStatus))
	m.HandleFunc("POST /api/analytics/chat", a.audited("analytics.chat", a.operator(a.askChat)))
	m.HandleFunc("GET /api/analytics/overview", a.operator(a.overview))

	m.HandleFunc("GET /api/operators", a.operator(a.listOperators))
	m.HandleFunc("POST /api/operators", a.audited("operator.create", a.operator(a.createOperator)))
	m.HandleFunc("GET /api/operators/{id}", a.operator(a.getOperator))
	m.HandleFunc("PATCH /api/operators/{id}", a.audited("operator.update", a.operator(a.updateOperator)))
	m.HandleFunc("POST /api/operators/{id}/password", a.audited("operator.password", a.operator(a.resetPassword)))
	m.HandleFunc("DELETE /api/operators/{id}/totp", a.audited("operator.totp_reset", a.operator(a.resetSecondFactor)))
	m.HandleFunc("POST /api/operators/{id}/sign-out", a.audited("operator.sign_out", a.operator(a.signOutEverywhere)))
	m.HandleFunc("GET /api/tokens", a.operator(a.listTokens))
	m.HandleFunc("POST /api/tokens", a.audited("token.create", a.operator(a.createToken)))
	m.HandleFunc("DELETE /api/tokens/{id}", a.audited("token.revoke", a.operator(a.revokeToken)))
	m.HandleFunc("GET /api/audit", a.operator(a.listAudit))

	a.sensors.Register(m)
}

// routeRecorder registers routes and remembers their patterns.
type routeRecorder struct {
	mux      *http.ServeMux
	patterns *[]string
}

func (r routeRecorder) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	*r.patterns = append(*r.patterns, pattern)
	r.mux.HandleFunc(pattern, h)
}

// MetricsHandler serves GET /metrics (Prometheus text) for a listener of
// its own: the public API does not serve it, so a scraper needs no
// credentials and the Internet sees no metrics.
func (a *API) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", a.metrics)
	return mux
}

// ServeHTTP implements http.Handler: security headers, CORS, routing,
// request metrics and logs around the routes.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := a.clock()
	rec := &statusrec.Recorder{ResponseWriter: w}
	h := rec.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	a.cors(h, r)

	route := "unmatched"
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			a.log.Error("handler panicked", "route", route, "panic", v)
			if !rec.Wrote() {
				problem.Write(rec, r, internalProblem())
			}
		}
		a.requestMetrics.add(route, rec.Code())
		a.log.Debug("request", "method", r.Method, "route", route, "status", rec.Code(), "duration", a.clock().Sub(start))
	}()

	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		route = "preflight"
		a.preflight(rec, r)
		return
	}
	if _, pattern := a.mux.Handler(r); pattern != "" {
		route = pattern
		a.mux.ServeHTTP(rec, r)
		return
	}
	a.unrouted(rec, r)
}

// unrouted answers 404/405 as problems rather than ServeMux's plain text.
func (a *API) unrouted(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		problem.Write(w, r, problem.For(problem.CodeMethodNotAllowed, r.Method+" is not allowed here; use "+strings.Join(allowed, " or ")))
		return
	}
	problem.Write(w, r, problem.For(problem.CodeRouteNotFound, "no such route"))
}

// canonicalOrigin returns scheme://host[:port] in lower case, or false when
// o is not an origin (paths, queries, user info are refused).
func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}
