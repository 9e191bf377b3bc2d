// Package provisionerclient is the control plane's HTTP client for the NATS
// provisioner: it ensures tenant accounts, sensor and backend users, and
// revokes users, authenticating with the shared secret. Every route is
// create-or-return on the provisioner, so calls are retried with exponential
// back-off and jitter (package backoff) on network errors, 5xx and 429; a circuit breaker
// named "nats-provisioner" fails calls fast while the provisioner is down.
// Provisioner problem responses are mapped to the fleet sentinel errors; no
// HTTP status ever reaches the caller.
package provisionerclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sony/gobreaker/v2"

	wire "github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/sdk/backoff"
	"github.com/rxc-project/rxc/sdk/logkey"
	catalogue "github.com/rxc-project/rxc/sdk/problem"
)

// BreakerName is the circuit breaker's name in logs.
const BreakerName = "nats-provisioner"

// Defaults applied by New to zero Config fields.
const (
	DefaultHeaderName          = "X-Backend-Shared-Secret"
	DefaultTimeout             = 5 * time.Second
	DefaultMaxRetries          = 3
	DefaultRetryBaseDelay      = 100 * time.Millisecond
	DefaultRetryMaxDelay       = 2 * time.Second
	DefaultConsecutiveFailures = 5
	DefaultOpenTimeout         = 30 * time.Second
)

const (
	// maxResponseBytes bounds a success body: creds and JWTs are a few KiB.
	maxResponseBytes = 1 << 20
	// maxProblemBytes bounds an error body; beyond it the problem is ignored.
	maxProblemBytes = 64 << 10
	// maxRetryAfter caps how long a 429 or 503 Retry-After may hold a call.
	maxRetryAfter = 10 * time.Second
)

// BreakerConfig tunes the circuit breaker.
type BreakerConfig struct {
	// ConsecutiveFailures opens the breaker (default 5). Every failed
	// attempt counts, retries included; 4xx answers other than 429 do not.
	ConsecutiveFailures uint32
	// OpenTimeout is how long the breaker stays open before letting one
	// trial request through (default 30s).
	OpenTimeout time.Duration
}

// Config wires a Client.
type Config struct {
	// Enabled false makes every method return fleet.ErrProvisionerDisabled
	// without touching the network; the other fields are then optional.
	Enabled bool
	// BaseURL is the provisioner's http(s) root, e.g. http://provisioner:8080.
	BaseURL      string
	SharedSecret string
	// HeaderName carries the shared secret (default X-Backend-Shared-Secret).
	HeaderName string
	// Timeout bounds one method call, retries and back-off included (default 5s).
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt (default 3;
	// negative means none).
	MaxRetries int
	// RetryBaseDelay and RetryMaxDelay shape the back-off: attempt n waits a
	// random time in [step/2, step], step = min(RetryMaxDelay,
	// RetryBaseDelay·2ⁿ) (defaults 100ms, 2s; package backoff).
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	Breaker        BreakerConfig
	// Logger names the component (With("component", …)): the client adds
	// no component key of its own, so no record carries it twice.
	Logger *slog.Logger
	// HTTPClient is optional. The client never follows redirects, so the
	// shared secret cannot be forwarded to another host.
	HTTPClient *http.Client
}

// Client calls the provisioner. It is safe for concurrent use.
type Client struct {
	enabled    bool
	base       *url.URL
	secret     string
	header     string
	timeout    time.Duration
	maxRetries int
	retry      backoff.Policy
	http       *http.Client
	log        *slog.Logger
	cb         *gobreaker.CircuitBreaker[struct{}]
}

// idleConnsPerHost is how many kept-alive connections to the provisioner
// the client holds for reuse.
const idleConnsPerHost = 64

// New checks cfg, applies defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HeaderName == "" {
		cfg.HeaderName = DefaultHeaderName
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.RetryBaseDelay <= 0 {
		cfg.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if cfg.RetryMaxDelay <= 0 {
		cfg.RetryMaxDelay = DefaultRetryMaxDelay
	}
	if cfg.Breaker.ConsecutiveFailures == 0 {
		cfg.Breaker.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if cfg.Breaker.OpenTimeout <= 0 {
		cfg.Breaker.OpenTimeout = DefaultOpenTimeout
	}
	c := &Client{
		enabled: cfg.Enabled, secret: cfg.SharedSecret, header: http.CanonicalHeaderKey(cfg.HeaderName),
		timeout: cfg.Timeout, maxRetries: cfg.MaxRetries, retry: backoff.Policy{Min: cfg.RetryBaseDelay, Max: cfg.RetryMaxDelay},
		log: cfg.Logger,
	}
	if !validToken(cfg.HeaderName) {
		return nil, errors.New("provisionerclient: header name is not a valid HTTP header name")
	}
	if cfg.Enabled {
		base, err := url.Parse(cfg.BaseURL)
		if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
			return nil, errors.New("provisionerclient: base URL must be an absolute http or https URL")
		}
		if cfg.SharedSecret == "" {
			return nil, errors.New("provisionerclient: shared secret is required when enabled")
		}
		c.base = base
	}
	// The default transport keeps 2 idle connections per host: under a
	// burst of enrolments every further request would open (and close) its
	// own TCP connection to the provisioner.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = idleConnsPerHost
	hc := &http.Client{Transport: tr}
	if cfg.HTTPClient != nil {
		copied := *cfg.HTTPClient
		hc = &copied
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = hc

	threshold := cfg.Breaker.ConsecutiveFailures
	c.cb = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        BreakerName,
		Timeout:     cfg.Breaker.OpenTimeout,
		ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= threshold },
		IsSuccessful: func(err error) bool {
			var ae *attemptError
			return err == nil || errors.As(err, &ae) && ae.clientError
		},
		IsExcluded: func(err error) bool {
			var ae *attemptError
			return errors.As(err, &ae) && ae.callerGone
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			c.log.Warn("circuit breaker state changed", "name", name, "from", from.String(), "to", to.String())
		},
	})
	return c, nil
}

// Enabled reports whether provisioning is switched on.
func (c *Client) Enabled() bool { return c.enabled }

// BreakerState is "closed", "open" or "half-open".
func (c *Client) BreakerState() string { return c.cb.State().String() }

// EnsureAccount creates the tenant's NATS account or returns the existing
// one, and answers its public key.
func (c *Client) EnsureAccount(ctx context.Context, tenantID, name string) (string, error) {
	const op = "ensure account"
	if err := c.check(op); err != nil {
		return "", err
	}
	if err := ids.Validate(tenantID); err != nil {
		return "", fmt.Errorf("provisioner: %s: tenant id: %w: %w", op, fleet.ErrInvalidInput, err)
	}
	var out wire.AccountResponse
	in := wire.AccountRequest{TenantID: tenantID, Name: name}
	if err := c.call(ctx, op, "/accounts", in, &out); err != nil {
		return "", err
	}
	if out.AccountPubKey == "" {
		return "", incomplete(op, "accountPubKey")
	}
	return out.AccountPubKey, nil
}

// EnsureSensorUser returns the sensor's NATS credentials, minting a user
// when it has none (or only a revoked one). A tenant without an account
// gives a *ProblemError wrapping fleet.ErrTenantNotProvisioned.
func (c *Client) EnsureSensorUser(ctx context.Context, tenantID, sensorID string) (fleet.NATSCredentials, error) {
	const op = "ensure sensor user"
	if err := c.check(op); err != nil {
		return fleet.NATSCredentials{}, err
	}
	if err := ids.ValidateSensor(tenantID, sensorID); err != nil {
		return fleet.NATSCredentials{}, fmt.Errorf("provisioner: %s: %w: %w", op, fleet.ErrInvalidInput, err)
	}
	var out wire.UserResponse
	in := wire.UserRequest{TenantID: tenantID, SensorID: sensorID}
	if err := c.call(ctx, op, "/users", in, &out); err != nil {
		return fleet.NATSCredentials{}, err
	}
	if out.AccountID == "" || out.UserPubKey == "" || out.Creds == "" {
		return fleet.NATSCredentials{}, incomplete(op, "accountId, userPubKey and creds")
	}
	return fleet.NATSCredentials{
		AccountPubKey: out.AccountID, UserPubKey: out.UserPubKey, Creds: out.Creds,
		Stream: out.Stream, Consumer: out.Consumer, JSAPIPrefix: out.JSAPIPrefix, InboxPrefix: out.InboxPrefix,
		CommandSubject: out.CommandSubject, StatusSubject: out.StatusSubject,
	}, nil
}

// RevokeUser revokes a user key in an account; repeating it is harmless.
func (c *Client) RevokeUser(ctx context.Context, accountPubKey, userPubKey string) error {
	const op = "revoke user"
	if err := c.check(op); err != nil {
		return err
	}
	if accountPubKey == "" || userPubKey == "" {
		return fmt.Errorf("provisioner: %s: account and user keys are required: %w", op, fleet.ErrInvalidInput)
	}
	in := wire.RevokeRequest{AccountID: accountPubKey, UserPubKey: userPubKey}
	return c.call(ctx, op, "/revoke", in, &wire.RevokeResponse{})
}

// BackendCreds returns the .creds content of the named backend user of the
// CONTROL account (the provisioner's default name when name is empty).
func (c *Client) BackendCreds(ctx context.Context, name string) (string, error) {
	const op = "backend creds"
	if err := c.check(op); err != nil {
		return "", err
	}
	var out wire.BackendUserResponse
	in := wire.BackendUserRequest{Name: name}
	if err := c.call(ctx, op, "/backend-user", in, &out); err != nil {
		return "", err
	}
	if out.Creds == "" {
		return "", incomplete(op, "creds")
	}
	return out.Creds, nil
}

func (c *Client) check(op string) error {
	if !c.enabled {
		return fmt.Errorf("provisioner: %s: %w", op, fleet.ErrProvisionerDisabled)
	}
	return nil
}

func incomplete(op, fields string) error {
	return fmt.Errorf("provisioner: %s: response lacks %s: %w", op, fields, fleet.ErrProvisionerUnavailable)
}

// call POSTs in to path and decodes the answer into out, retrying what a
// retry can fix until the attempts, the call's timeout or ctx run out.
func (c *Client) call(ctx context.Context, op, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("provisioner: %s: encode request: %w", op, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	endpoint := c.base.JoinPath(path).String()
	for attempt := 0; ; attempt++ {
		_, err := c.cb.Execute(func() (struct{}, error) {
			return struct{}{}, c.attempt(callCtx, ctx, endpoint, body, out)
		})
		if err == nil {
			return nil
		}
		if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
			return fmt.Errorf("provisioner: %s: %w: %w", op, fleet.ErrProvisionerUnavailable, err)
		}
		var ae *attemptError
		if !errors.As(err, &ae) {
			return fmt.Errorf("provisioner: %s: %w", op, err)
		}
		final := ae.final(op)
		if !ae.retry || attempt >= c.maxRetries {
			return final
		}
		wait := c.retry.Delay(attempt)
		if ae.retryAfter > 0 {
			wait = min(ae.retryAfter, maxRetryAfter)
		}
		if deadline, ok := callCtx.Deadline(); ok && time.Until(deadline) < wait {
			return final
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, "provisioner call failed; retrying",
			slog.String("op", op), slog.Int("attempt", attempt+1), slog.Duration("wait", wait), slog.String(logkey.Error, ae.err.Error()))
		t := time.NewTimer(wait)
		select {
		case <-callCtx.Done():
			t.Stop()
			return (&attemptError{err: callCtx.Err(), callerGone: ctx.Err() != nil}).final(op)
		case <-t.C:
		}
	}
}

// attemptError classifies one failed attempt for the retry loop and the
// breaker. err is already mapped to a fleet sentinel where one applies.
type attemptError struct {
	err         error
	retry       bool
	retryAfter  time.Duration
	clientError bool // the provisioner answered: not a breaker failure
	callerGone  bool // the caller's ctx ended: neither success nor failure
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

func (e *attemptError) final(op string) error {
	var pe *ProblemError
	if errors.As(e.err, &pe) {
		pe.Op = op
		return pe
	}
	if errors.Is(e.err, context.Canceled) {
		return fmt.Errorf("provisioner: %s: %w", op, e.err)
	}
	if errors.Is(e.err, fleet.ErrProvisionerUnavailable) {
		return fmt.Errorf("provisioner: %s: %w", op, e.err)
	}
	return fmt.Errorf("provisioner: %s: %w: %w", op, fleet.ErrProvisionerUnavailable, e.err)
}

func (c *Client) attempt(callCtx, parent context.Context, endpoint string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return &attemptError{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set(c.header, c.secret)
	resp, err := c.http.Do(req)
	if err != nil {
		if parent.Err() != nil {
			return &attemptError{err: parent.Err(), callerGone: true}
		}
		if callCtx.Err() != nil {
			return &attemptError{err: callCtx.Err()}
		}
		return &attemptError{err: err, retry: true}
	}
	defer func() {
		// Drain a little so the connection can be reused, never a flood.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return decodeSuccess(resp.Body, out)
	}
	return mapStatus(resp)
}

func decodeSuccess(body io.Reader, out any) error {
	raw, err := io.ReadAll(io.LimitReader(body, maxResponseBytes+1))
	if err != nil {
		return &attemptError{err: fmt.Errorf("read response: %w", err), retry: true}
	}
	if len(raw) > maxResponseBytes {
		return &attemptError{err: fmt.Errorf("response larger than %d bytes refused", maxResponseBytes)}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &attemptError{err: fmt.Errorf("malformed response: %w", err)}
	}
	return nil
}

// mapStatus is the one place where provisioner statuses become errors.
func mapStatus(resp *http.Response) error {
	p := readProblem(resp)
	status := resp.StatusCode
	switch {
	case status == http.StatusTooManyRequests || status >= 500:
		return &attemptError{
			err:        fmt.Errorf("%w: provisioner answered %d%s", fleet.ErrProvisionerUnavailable, status, p.suffix()),
			retry:      true,
			retryAfter: retryAfter(resp.Header.Get("Retry-After")),
		}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &attemptError{clientError: true, err: p.typed(fleet.ErrProvisionerUnavailable,
			"shared secret rejected: check the configured secret and header name")}
	case status == http.StatusNotFound && p.Code == string(catalogue.CodeTenantHasNoAccount):
		return &attemptError{clientError: true, err: p.typed(fleet.ErrTenantNotProvisioned, "tenant has no account")}
	case status == http.StatusNotFound && p.Code != "" && p.Code != string(catalogue.CodeRouteNotFound):
		return &attemptError{clientError: true, err: p.typed(fleet.ErrNotFound, "not found")}
	case status == http.StatusConflict:
		return &attemptError{clientError: true, err: p.typed(fleet.ErrConflict, "conflict")}
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusUnprocessableEntity:
		return &attemptError{clientError: true, err: p.typed(fleet.ErrInvalidInput, "request refused")}
	default:
		// Redirects, unknown routes, methods: a misconfigured base URL.
		return &attemptError{clientError: status >= 400, err: fmt.Errorf(
			"%w: unexpected provisioner answer %d%s (check the base URL)", fleet.ErrProvisionerUnavailable, status, p.suffix())}
	}
}

// ProblemError is a provisioner refusal carrying its stable problem code.
// It wraps the fleet sentinel that says what went wrong
// (ErrTenantNotProvisioned for tenant_has_no_account, ErrNotFound for other
// unknown objects, ErrInvalidInput, ErrConflict, or ErrProvisionerUnavailable
// for a rejected shared secret).
type ProblemError struct {
	// Op is the client operation, e.g. "ensure sensor user".
	Op string
	// Code is the provisioner's problem code (see package problem's catalogue);
	// empty when the answer had none.
	Code string
	// Detail is the provisioner's human-readable explanation.
	Detail string
	kind   error
	msg    string
}

func (e *ProblemError) Error() string {
	s := "provisioner: " + e.Op + ": " + e.msg
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s + ": " + e.kind.Error()
}

// Unwrap returns the fleet sentinel.
func (e *ProblemError) Unwrap() error { return e.kind }

type problem struct {
	Code   string `json:"code"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

func readProblem(resp *http.Response) problem {
	var p problem
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/problem+json") && !strings.HasPrefix(ct, "application/json") {
		return p
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes+1))
	if err != nil || len(raw) > maxProblemBytes {
		return problem{}
	}
	if json.Unmarshal(raw, &p) != nil {
		return problem{}
	}
	// The detail ends up in logs and errors: keep it short and printable.
	p.Detail = clip(p.Detail, 256)
	p.Code = clip(p.Code, 64)
	return p
}

func (p problem) typed(kind error, msg string) *ProblemError {
	return &ProblemError{Code: p.Code, Detail: p.Detail, kind: kind, msg: msg}
}

func (p problem) suffix() string {
	if p.Code == "" {
		return ""
	}
	return " (" + p.Code + ")"
}

func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		return s[:n]
	}
	return s
}

// retryAfter parses delta-seconds or an HTTP date; zero when absent or bad.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if secs < 0 {
			return 0
		}
		return min(time.Duration(secs)*time.Second, time.Hour)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}
