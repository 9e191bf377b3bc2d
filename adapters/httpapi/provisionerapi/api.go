// Package provisionerapi is the provisioner's HTTP edge: the URL account
// resolver nats-server calls, and the shared-secret protected routes the
// control plane uses to mint accounts and users and to revoke them. It
// validates input, maps core errors to RFC 9457 problems in one function, and
// holds no business rules of its own.
package provisionerapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nkeys"

	wire "github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/problem"
)

// MaxBodyBytes is the largest request body accepted (64 KiB).
const MaxBodyBytes = 64 << 10

// Header names that may carry the shared secret, in order of preference.
const (
	SecretHeader       = "X-Backend-Shared-Secret"
	LegacySecretHeader = "X-Product-Provisioner-Secret"
)

// ResolverPath is the URL resolver's base path; nats-server appends the
// account public key.
const ResolverPath = "/jwt/v1/accounts/"

// Pinger reports whether the store answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Resolver answers the URL resolver's routes.
type Resolver interface {
	SystemAccountJWT(ctx context.Context) (string, error)
	AccountJWT(ctx context.Context, pubKey string) (string, error)
}

// ErrStarting is what a write route answers (503 database_unavailable)
// while the API runs without a Service: a provisioner that started while
// PostgreSQL was unreachable serves its resolver from the last known copy
// and waits for the database to finish starting.
var ErrStarting = errors.New("the provisioner is waiting for PostgreSQL to finish starting")

// Config wires the API.
type Config struct {
	// Service runs the use cases. Nil means the provisioner is still
	// starting: the resolver answers from Resolver, every other route 503.
	Service *provisioning.Service
	// Resolver answers the resolver routes; defaults to Service.
	Resolver Resolver
	// Health pings the store for /healthz; required with a Service.
	Health       Pinger
	SharedSecret string
	Logger       *slog.Logger
	// HealthTimeout bounds the store ping of /healthz (default 2 s).
	HealthTimeout time.Duration
	// Readiness lists the dependencies GET /readyz reports one by one
	// (PostgreSQL, NATS); each check is bounded by HealthTimeout.
	Readiness []Check
	// Metrics serves GET /metrics when set (Prometheus text).
	Metrics http.Handler
	// DatabaseUnavailable tells an error of an unreachable database
	// (pgoutage.Is) from others: those answer 503 database_unavailable
	// with Retry-After instead of 500. Nil: no error is one.
	DatabaseUnavailable func(error) bool
}

// Check is one readiness check.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
	// Advisory checks report "degraded" and their error in details when
	// they fail, without making the provisioner unready: the condition is
	// worked on in the background and taking the replica out of service
	// would not help.
	Advisory bool
}

// Retry-After values: how long a caller should wait after an outage.
const (
	retryDatabase = "5"
	retryNATS     = "2"
)

// API serves the provisioner's routes.
type API struct {
	svc           *provisioning.Service
	resolver      Resolver
	health        Pinger
	secret        [sha256.Size]byte
	log           *slog.Logger
	healthTimeout time.Duration
	errorTable    []errorRule
	readiness     []Check
	mux           *http.ServeMux
	etags         etags
}

// New returns the API handler.
func New(cfg Config) (*API, error) {
	switch {
	case cfg.Service != nil && cfg.Health == nil:
		return nil, errors.New("provisionerapi: health is required with a service")
	case cfg.Service == nil && cfg.Resolver == nil:
		return nil, errors.New("provisionerapi: a service or a resolver is required")
	case cfg.Resolver == nil:
		cfg.Resolver = cfg.Service
	}
	if len(cfg.SharedSecret) < 16 {
		return nil, errors.New("provisionerapi: the shared secret must be at least 16 characters")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = 2 * time.Second
	}
	if cfg.DatabaseUnavailable == nil {
		cfg.DatabaseUnavailable = func(error) bool { return false }
	}
	a := &API{
		svc: cfg.Service, resolver: cfg.Resolver, health: cfg.Health, log: cfg.Logger, healthTimeout: cfg.HealthTimeout, errorTable: errorTable(cfg.DatabaseUnavailable), readiness: cfg.Readiness,
		// Hashing both sides gives equal-length inputs to the constant-time
		// comparison, so the secret's length does not leak either.
		secret: sha256.Sum256([]byte(cfg.SharedSecret)),
		mux:    http.NewServeMux(),
	}
	a.mux.HandleFunc("GET /healthz", a.healthz)
	a.mux.HandleFunc("GET /readyz", a.readyz)
	if cfg.Metrics != nil {
		a.mux.Handle("GET /metrics", cfg.Metrics)
	}
	a.mux.HandleFunc("GET "+ResolverPath, a.systemAccount)
	a.mux.HandleFunc("GET "+ResolverPath+"{pubkey}", func(w http.ResponseWriter, r *http.Request) { a.account(w, r, r.PathValue("pubkey")) })
	a.mux.Handle("POST /accounts", a.authorized(a.createAccount))
	a.mux.Handle("POST /users", a.authorized(a.createUser))
	a.mux.Handle("POST /backend-user", a.authorized(a.createBackendUser))
	a.mux.Handle("POST /revoke", a.authorized(a.revoke))
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The resolver is the hot path (every nats-server asks it for every
	// account it loads): answer it without the router's pattern matching.
	if r.Method == http.MethodGet && len(r.URL.Path) > len(ResolverPath) && strings.HasPrefix(r.URL.Path, ResolverPath) {
		a.account(w, r, r.URL.Path[len(ResolverPath):])
		return
	}
	// Handler only finds the pattern; ServeMux.ServeHTTP also sets the path
	// values the handlers read.
	if _, pattern := a.mux.Handler(r); pattern == "" {
		a.unrouted(w, r)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// unrouted answers 404/405 as problems rather than ServeMux's plain text.
func (a *API) unrouted(w http.ResponseWriter, r *http.Request) {
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" {
			w.Header().Set("Allow", m)
			problem.Write(w, r, problem.For(problem.CodeMethodNotAllowed, r.Method+" is not allowed here"))
			return
		}
	}
	problem.Write(w, r, problem.For(problem.CodeRouteNotFound, "no such route"))
}

func (a *API) authorized(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given := r.Header.Get(SecretHeader)
		if given == "" {
			given = r.Header.Get(LegacySecretHeader)
		}
		sum := sha256.Sum256([]byte(given))
		if given == "" || subtle.ConstantTimeCompare(sum[:], a.secret[:]) != 1 {
			problem.Write(w, r, problem.For(problem.CodeUnauthorized, "missing or wrong shared secret"))
			return
		}
		if a.svc == nil {
			a.fail(w, r, ErrStarting)
			return
		}
		next(w, r)
	})
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), a.healthTimeout)
	defer cancel()
	err := ErrStarting
	if a.health != nil {
		err = a.health.Ping(ctx)
	}
	if err != nil {
		a.log.Warn("health check failed", logkey.Error, err)
		w.Header().Set("Retry-After", retryDatabase)
		problem.Write(w, r, problem.For(problem.CodeDatabaseUnavailable, "PostgreSQL did not answer in time"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readiness is GET /readyz's body: each dependency's state.
type readiness struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"`
	// Details says why an advisory check is degraded.
	Details map[string]string `json:"details,omitempty"`
}

// readyz runs every readiness check at once and reports each: 200 when all
// pass, else 503 with Retry-After. /healthz stays the liveness check.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	out := readiness{Ready: true, Checks: make(map[string]string, len(a.readiness))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range a.readiness {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), a.healthTimeout)
			defer cancel()
			state, detail := "ok", ""
			if err := c.Fn(ctx); err != nil && c.Advisory {
				state, detail = "degraded", err.Error()
			} else if err != nil {
				a.log.Warn("readiness check failed", "check", c.Name, logkey.Error, err)
				state = "unavailable"
			}
			mu.Lock()
			out.Checks[c.Name] = state
			out.Ready = out.Ready && state != "unavailable"
			if detail != "" {
				if out.Details == nil {
					out.Details = map[string]string{}
				}
				out.Details[c.Name] = detail
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	status := http.StatusOK
	if !out.Ready {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", retryDatabase)
	}
	problem.WriteJSON(w, status, out)
}

func (a *API) systemAccount(w http.ResponseWriter, r *http.Request) {
	tok, err := a.resolver.SystemAccountJWT(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJWT(w, r, tok, a.etags.of("", tok))
}

func (a *API) account(w http.ResponseWriter, r *http.Request, pk string) {
	// A key served before was checked then: the check decodes the key
	// (base32, CRC) and allocates, on every request of the hot path.
	if !a.etags.known(pk) && !nkeys.IsValidPublicAccountKey(pk) {
		problem.Write(w, r, problem.For(problem.CodeInvalidPublicKey, "the path must end in an account public key").WithTitle("Invalid account public key"))
		return
	}
	tok, err := a.resolver.AccountJWT(r.Context(), pk)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJWT(w, r, tok, a.etags.of(pk, tok))
}

// Header values shared by every resolver response; assigning the canonical
// keys directly skips canonicalisation on the hot path.
var (
	noCache     = []string{"no-cache"}
	contentJWT  = []string{"application/jwt"}
	headerETag  = http.CanonicalHeaderKey("ETag")
	headerCache = http.CanonicalHeaderKey("Cache-Control")
	headerType  = http.CanonicalHeaderKey("Content-Type")
)

// etags remembers the ETag of the last JWT served per account, so the hash
// is computed once per JWT rather than once per request. Only keys that
// passed the public key check are stored.
type etags struct{ m sync.Map }

// etagEntry's header is the ETag as a header value, shared by every
// answer with it (no slice per request).
type etagEntry struct {
	jwt    string
	header []string
}

func (e *etags) known(pk string) bool {
	_, ok := e.m.Load(pk)
	return ok
}

func (e *etags) of(pk, tok string) []string {
	if v, ok := e.m.Load(pk); ok {
		if ent := v.(*etagEntry); ent.jwt == tok {
			return ent.header
		}
	}
	sum := sha256.Sum256([]byte(tok))
	var buf [2 + 2*16]byte
	buf[0], buf[len(buf)-1] = '"', '"'
	hex.Encode(buf[1:len(buf)-1], sum[:16])
	header := []string{string(buf[:])}
	e.m.Store(pk, &etagEntry{jwt: tok, header: header})
	return header
}

func writeJWT(w http.ResponseWriter, r *http.Request, tok string, etagHeader []string) {
	etag := etagHeader[0]
	h := w.Header()
	h[headerETag] = etagHeader
	h[headerCache] = noCache
	if inm := r.Header["If-None-Match"]; len(inm) > 0 && etagMatches(strings.Join(inm, ","), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h[headerType] = contentJWT
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, tok)
}

// etagMatches implements If-None-Match's weak comparison over a list.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

func (a *API) createAccount(w http.ResponseWriter, r *http.Request) {
	var req wire.AccountRequest
	if !decodeBody(w, r, &req) {
		return
	}
	acct, created, err := a.svc.EnsureTenantAccount(r.Context(), req.TenantID, req.Name)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if created {
		a.log.Info("tenant account created", logkey.Tenant, acct.TenantID, "account", acct.PubKey)
	}
	problem.WriteJSON(w, status(created), wire.AccountResponse{TenantID: acct.TenantID, Name: acct.Name, AccountPubKey: acct.PubKey, AccountJWT: acct.JWT})
}

func (a *API) createUser(w http.ResponseWriter, r *http.Request) {
	var req wire.UserRequest
	if !decodeBody(w, r, &req) {
		return
	}
	su, created, err := a.svc.EnsureSensorUser(r.Context(), req.TenantID, req.SensorID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if created {
		a.log.Info("sensor user created", logkey.Tenant, req.TenantID, logkey.Sensor, req.SensorID, "user", su.User.PubKey)
	}
	s := su.Sensor
	problem.WriteJSON(w, status(created), wire.UserResponse{
		TenantID: s.TenantID, SensorID: s.SensorID, AccountID: su.User.AccountPubKey,
		UserPubKey: su.User.PubKey, UserJWT: su.User.JWT, Creds: string(su.Creds),
		Stream: s.Stream, Consumer: s.Consumer(), JSAPIPrefix: topology.APIPrefix, InboxPrefix: s.InboxPrefix(),
		CommandSubject: s.CommandSubject(), StatusSubject: s.StatusSubject(),
	})
}

func (a *API) createBackendUser(w http.ResponseWriter, r *http.Request) {
	var req wire.BackendUserRequest
	if r.ContentLength != 0 {
		if !decodeBody(w, r, &req) {
			return
		}
	}
	bu, created, err := a.svc.EnsureBackendUser(r.Context(), req.Name)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if created {
		a.log.Info("backend user created", "name", bu.User.Name, "user", bu.User.PubKey)
	}
	problem.WriteJSON(w, status(created), wire.BackendUserResponse{
		Name: bu.User.Name, AccountID: bu.User.AccountPubKey, UserPubKey: bu.User.PubKey, UserJWT: bu.User.JWT, Creds: string(bu.Creds),
	})
}

func (a *API) revoke(w http.ResponseWriter, r *http.Request) {
	var req wire.RevokeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if !nkeys.IsValidPublicAccountKey(req.AccountID) {
		problem.Write(w, r, problem.For(problem.CodeInvalidPublicKey, "accountId must be an account public key").WithTitle("Invalid account public key"))
		return
	}
	if !nkeys.IsValidPublicUserKey(req.UserPubKey) {
		problem.Write(w, r, problem.For(problem.CodeInvalidPublicKey, "userPubKey must be a user public key").WithTitle("Invalid user public key"))
		return
	}
	rev, acct, err := a.svc.Revoke(r.Context(), req.AccountID, req.UserPubKey)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.log.Info("user revoked", "account", rev.AccountPubKey, "user", rev.UserPubKey, "revokedAt", rev.RevokedAt)
	problem.WriteJSON(w, http.StatusOK, wire.RevokeResponse{AccountID: acct.PubKey, UserPubKey: rev.UserPubKey, RevokedAt: rev.RevokedAt, AccountJWT: acct.JWT})
}

// decodeBody reads the request's JSON body (at most MaxBodyBytes) into v;
// on failure it has answered the problem and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, v); p != nil {
		problem.Write(w, r, p)
		return false
	}
	return true
}

func status(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// fail is the one place where core errors become HTTP problems: err meets
// the rows of a.errorTable in order, and what matches none is an internal
// error.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	for _, rule := range a.errorTable {
		if !rule.match(err) {
			continue
		}
		if rule.log != "" {
			a.log.Log(r.Context(), rule.level, rule.log, "path", r.URL.Path, logkey.Error, err)
		}
		if rule.retryAfter != "" {
			w.Header().Set("Retry-After", rule.retryAfter)
		}
		d := rule.detail
		if d == "" {
			d = err.Error()
		}
		p := problem.For(rule.code, d)
		if rule.title != "" {
			p = p.WithTitle(rule.title)
		}
		problem.Write(w, r, p)
		return
	}
	a.log.Error("request failed", "path", r.URL.Path, logkey.Error, err)
	problem.Write(w, r, problem.For(problem.CodeInternal, "the request failed; see the provisioner's log"))
}

// errorRule is one row of the table that maps errors to problem codes; the
// catalogue gives the code's status and title.
type errorRule struct {
	match func(error) bool
	code  problem.Code
	// detail is the problem's detail; empty, the error's own message.
	detail string
	// title, when set, replaces the catalogue's title for this answer.
	title      string
	retryAfter string
	// log, when set, is logged at level with the path and the error.
	log   string
	level slog.Level
}

// errorTable is the provisioner's error → code table, first match wins.
// dbDown tells the store's outage errors.
func errorTable(dbDown func(error) bool) []errorRule {
	return []errorRule{
		{match: is(ids.ErrInvalidID), code: problem.CodeInvalidID},
		{match: is(provisioning.ErrInvalidName), code: problem.CodeInvalidName},
		{match: is(provisioning.ErrNoAccount), code: problem.CodeTenantHasNoAccount, detail: "create the tenant's account with POST /accounts first"},
		{match: is(provisioning.ErrConsumerNameTaken), code: problem.CodeConsumerNameTaken,
			log: "consumer name taken by another tenant and sensor", level: slog.LevelWarn,
			detail: "the durable consumer name cmd-<tenantId>-<sensorId> of this pair already belongs to another tenant and sensor (ids containing '-' can spell the same name); choose another sensor id"},
		{match: is(provisioning.ErrNotRevocable), code: problem.CodeUserNotRevocable,
			log: "refused to revoke a user that may not be revoked", level: slog.LevelWarn,
			detail: "only users of tenant accounts and the control account's backend users can be revoked; the system account's users and the provisioner's own control-admin user never are"},
		{match: is(provisioning.ErrUndeliverable), code: problem.CodeAccountJWTUndeliverable,
			log: "NATS refuses the account JWT; retried in the background", level: slog.LevelError,
			detail: "the change is stored, but NATS refuses the account JWT (larger than its maximum payload); the provisioner retries in the background, repeating the call does not help"},
		{match: is(provisioning.ErrNotFound), code: problem.CodeAccountNotFound, detail: "no account with that public key"},
		// Not retryable: the stream stays full until an operator raises
		// COMMAND_STREAM_MAX_CONSUMERS (or the account's limit).
		{match: is(provisioning.ErrConsumerLimit), code: problem.CodeConsumerLimitReached, title: "Command stream full",
			log: "command stream consumer limit reached", level: slog.LevelError,
			detail: "the command stream holds its maximum of consumers; an operator must raise COMMAND_STREAM_MAX_CONSUMERS (the user is kept; a retry after that finishes)"},
		{match: func(err error) bool { return dbDown(err) || errors.Is(err, ErrStarting) }, code: problem.CodeDatabaseUnavailable,
			log: "database unavailable", level: slog.LevelWarn, retryAfter: retryDatabase,
			detail: "PostgreSQL did not answer; nothing was changed unless the answer to a retry says so, retry later"},
		{match: is(provisioning.ErrNATSUnavailable), code: problem.CodeNATSUnavailable,
			log: "nats unavailable", level: slog.LevelWarn, retryAfter: retryNATS,
			detail: "the change is stored; retry the request to finish it"},
		{match: is(provisioning.ErrNoOperator), code: problem.CodeNoOperator, detail: "run provisioner init-operator"},
		{match: is(context.Canceled, context.DeadlineExceeded), code: problem.CodeTimeout,
			log: "request cancelled or timed out", level: slog.LevelWarn, retryAfter: retryNATS,
			detail: "the request did not complete in time; retry"},
	}
}

// is matches an error that is any of targets (problem.Is).
var is = problem.Is
