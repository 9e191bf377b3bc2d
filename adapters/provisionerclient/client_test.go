package provisionerclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/provisionerclient"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/internal/waitfor"
)

const secret = "s3cr3t-shared-value"

// reply is one scripted provisioner answer.
type reply struct {
	status     int
	body       any    // JSON-encoded unless problem is set
	code       string // problem code: the answer is application/problem+json
	retryAfter string
}

// provisioner is an httptest server speaking the provisioner's wire format:
// JSON bodies, problem+json errors with a code, shared-secret header on
// write routes. It answers from a script; past its end it repeats the last
// reply. It records every request it saw.
type provisioner struct {
	t      *testing.T
	srv    *httptest.Server
	header string
	calls  atomic.Int64

	mu     sync.Mutex
	script []reply
	seen   []seenRequest
}

type seenRequest struct {
	Path string
	Body map[string]any
}

func newProvisioner(t *testing.T, header string, script ...reply) *provisioner {
	t.Helper()
	p := &provisioner{t: t, header: header, script: script}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// wantCalls fails t unless the provisioner has answered want requests.
func (p *provisioner) wantCalls(t *testing.T, want int64) {
	t.Helper()
	if got := p.calls.Load(); got != want {
		t.Errorf("provisioner calls = %d, want %d", got, want)
	}
}

func (p *provisioner) serve(w http.ResponseWriter, r *http.Request) {
	n := int(p.calls.Add(1))
	var body map[string]any
	_ = json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&body)
	p.mu.Lock()
	p.seen = append(p.seen, seenRequest{Path: r.URL.Path, Body: body})
	var rep reply
	switch {
	case len(p.script) == 0:
		rep = reply{status: http.StatusInternalServerError, code: "internal"}
	case n <= len(p.script):
		rep = p.script[n-1]
	default:
		rep = p.script[len(p.script)-1]
	}
	p.mu.Unlock()
	if r.Method != http.MethodPost {
		writeProblem(w, http.StatusMethodNotAllowed, "method_not_allowed")
		return
	}
	if r.Header.Get(p.header) != secret {
		writeProblem(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	if rep.code != "" {
		writeProblem(w, rep.status, rep.code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	switch b := rep.body.(type) {
	case []byte:
		_, _ = w.Write(b)
	case nil:
	default:
		_ = json.NewEncoder(w).Encode(b)
	}
}

func writeProblem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "urn:rxc:problem:" + code, "title": code, "status": status, "detail": "detail for " + code, "code": code,
	})
}

func (p *provisioner) requests() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seenRequest(nil), p.seen...)
}

func (p *provisioner) setScript(script ...reply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script = script
	p.calls.Store(0)
}

// fast returns a config whose back-off keeps tests quick.
func fast(url string) provisionerclient.Config {
	return provisionerclient.Config{
		Enabled: true, BaseURL: url, SharedSecret: secret,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 5 * time.Millisecond,
	}
}

func newClient(t *testing.T, cfg provisionerclient.Config) *provisionerclient.Client {
	t.Helper()
	c, err := provisionerclient.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

const (
	accountKey = "ACXZRALIL3IQ3ZPVQSRVTH3SOMRZJJOR4XJ6TCBSVOQL6N4ORIB2GPCH"
	userKey    = "UCK2MRKPTKLCHHHNXHGCZ5CHHRO5O3G3TRIGMQ2ZJ7LTBPQSGKOZ5X5S"
)

func TestMethodsMapProvisionerAnswers(t *testing.T) {
	t.Parallel()
	creds := "-----BEGIN NATS USER JWT-----\neyJ0eXAi\n------END NATS USER JWT------\n"
	tests := []struct {
		name     string
		header   string
		answer   reply
		call     func(ctx context.Context, c *provisionerclient.Client) (any, error)
		wantReq  seenRequest
		wantResp any
	}{
		{
			name:   "ensure account",
			answer: reply{status: http.StatusCreated, body: map[string]any{"tenantId": "t1", "name": "Tenant One", "accountPubKey": accountKey, "accountJWT": "eyJ"}},
			call: func(ctx context.Context, c *provisionerclient.Client) (any, error) {
				return c.EnsureAccount(ctx, "t1", "Tenant One")
			},
			wantReq:  seenRequest{Path: "/accounts", Body: map[string]any{"tenantId": "t1", "name": "Tenant One"}},
			wantResp: accountKey,
		},
		{
			name:   "ensure sensor user",
			header: "X-Product-Provisioner-Secret",
			answer: reply{status: http.StatusOK, body: map[string]any{
				"tenantId": "t1", "sensorId": "s1", "accountId": accountKey, "userPubKey": userKey, "userJWT": "eyJ",
				"creds": creds, "stream": "RXC_CMD", "consumer": "cmd-t1-s1", "jsApiPrefix": "ctrl.API",
				"inboxPrefix": "_INBOX_t1_s1", "commandSubject": "rxc.t1.s1.cmd", "statusSubject": "rxc.t1.s1.status",
			}},
			call: func(ctx context.Context, c *provisionerclient.Client) (any, error) {
				return c.EnsureSensorUser(ctx, "t1", "s1")
			},
			wantReq: seenRequest{Path: "/users", Body: map[string]any{"tenantId": "t1", "sensorId": "s1"}},
			wantResp: fleet.NATSCredentials{
				AccountPubKey: accountKey, UserPubKey: userKey, Creds: creds, Stream: "RXC_CMD", Consumer: "cmd-t1-s1",
				JSAPIPrefix: "ctrl.API", InboxPrefix: "_INBOX_t1_s1", CommandSubject: "rxc.t1.s1.cmd", StatusSubject: "rxc.t1.s1.status",
			},
		},
		{
			name: "revoke user",
			answer: reply{status: http.StatusOK, body: map[string]any{
				"accountId": accountKey, "userPubKey": userKey, "revokedAt": "2026-01-02T03:04:05Z", "accountJWT": "eyJ",
			}},
			call: func(ctx context.Context, c *provisionerclient.Client) (any, error) {
				return nil, c.RevokeUser(ctx, accountKey, userKey)
			},
			wantReq: seenRequest{Path: "/revoke", Body: map[string]any{"accountId": accountKey, "userPubKey": userKey}},
		},
		{
			name:   "backend creds",
			answer: reply{status: http.StatusCreated, body: map[string]any{"accountId": accountKey, "userPubKey": userKey, "userJWT": "eyJ", "creds": creds}},
			call: func(ctx context.Context, c *provisionerclient.Client) (any, error) {
				return c.BackendCreds(ctx, "controlplane")
			},
			wantReq:  seenRequest{Path: "/backend-user", Body: map[string]any{"name": "controlplane"}},
			wantResp: creds,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			header := tt.header
			if header == "" {
				header = provisionerclient.DefaultHeaderName
			}
			p := newProvisioner(t, header, tt.answer)
			cfg := fast(p.srv.URL + "/")
			cfg.HeaderName = tt.header
			c := newClient(t, cfg)
			got, err := tt.call(t.Context(), c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if diff := cmp.Diff(tt.wantResp, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]seenRequest{tt.wantReq}, p.requests()); diff != "" {
				t.Errorf("requests seen by the provisioner (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWrongSecretIsReportedAndNotRetried(t *testing.T) {
	t.Parallel()
	p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: http.StatusOK, body: map[string]any{"accountPubKey": accountKey}})
	cfg := fast(p.srv.URL)
	cfg.SharedSecret = "not-the-secret"
	c := newClient(t, cfg)
	_, err := c.EnsureAccount(t.Context(), "t1", "")
	if !errors.Is(err, fleet.ErrProvisionerUnavailable) || !strings.Contains(err.Error(), "shared secret") {
		t.Fatalf("err = %v, want ErrProvisionerUnavailable naming the shared secret", err)
	}
	p.wantCalls(t, 1)
	if got := c.BreakerState(); got != "closed" {
		t.Errorf("breaker = %q, want closed", got)
	}
}

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	ok := reply{status: http.StatusCreated, body: map[string]any{"accountPubKey": accountKey}}
	tests := []struct {
		name      string
		script    []reply
		wantErr   error
		wantCode  string
		wantCalls int64
	}{
		{name: "503 twice then success", script: []reply{{status: 503, code: "nats_unavailable"}, {status: 503, code: "nats_unavailable"}, ok}, wantCalls: 3},
		{name: "network-level 502 without body then success", script: []reply{{status: 502}, ok}, wantCalls: 2},
		{name: "429 with Retry-After 0 then success", script: []reply{{status: 429, code: "rate_limited", retryAfter: "0"}, ok}, wantCalls: 2},
		{name: "5xx until retries run out", script: []reply{{status: 500, code: "internal"}}, wantErr: fleet.ErrProvisionerUnavailable, wantCalls: 4},
		{name: "400 is not retried", script: []reply{{status: 400, code: "invalid_id"}, ok}, wantErr: fleet.ErrInvalidInput, wantCode: "invalid_id", wantCalls: 1},
		{name: "413 is invalid input", script: []reply{{status: 413, code: "body_too_large"}, ok}, wantErr: fleet.ErrInvalidInput, wantCode: "body_too_large", wantCalls: 1},
		{name: "404 problem is not found", script: []reply{{status: 404, code: "account_not_found"}, ok}, wantErr: fleet.ErrNotFound, wantCode: "account_not_found", wantCalls: 1},
		{name: "tenant without account keeps its meaning", script: []reply{{status: 404, code: "tenant_has_no_account"}, ok}, wantErr: fleet.ErrTenantNotProvisioned, wantCode: "tenant_has_no_account", wantCalls: 1},
		{name: "unknown route is a misconfiguration", script: []reply{{status: 404, code: "route_not_found"}, ok}, wantErr: fleet.ErrProvisionerUnavailable, wantCalls: 1},
		{name: "2xx with malformed JSON", script: []reply{{status: 200, body: []byte("{not json")}}, wantErr: fleet.ErrProvisionerUnavailable, wantCalls: 1},
		{name: "2xx without the account key", script: []reply{{status: 200, body: map[string]any{"tenantId": "t1"}}}, wantErr: fleet.ErrProvisionerUnavailable, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvisioner(t, provisionerclient.DefaultHeaderName, tt.script...)
			c := newClient(t, fast(p.srv.URL))
			got, err := c.EnsureAccount(t.Context(), "t1", "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && got != accountKey {
				t.Errorf("account = %q, want %q", got, accountKey)
			}
			var pe *provisionerclient.ProblemError
			if tt.wantCode != "" && (!errors.As(err, &pe) || pe.Code != tt.wantCode) {
				t.Errorf("err = %#v, want *ProblemError with code %q", err, tt.wantCode)
			}
			p.wantCalls(t, tt.wantCalls)
		})
	}
}

func TestSensorUserOfTenantWithoutAccount(t *testing.T) {
	t.Parallel()
	p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: 404, code: "tenant_has_no_account"})
	c := newClient(t, fast(p.srv.URL))
	_, err := c.EnsureSensorUser(t.Context(), "t1", "s1")
	var pe *provisionerclient.ProblemError
	if !errors.As(err, &pe) || !errors.Is(err, fleet.ErrTenantNotProvisioned) {
		t.Fatalf("err = %v, want *ProblemError wrapping ErrTenantNotProvisioned", err)
	}
	if errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("err = %v also reads as ErrNotFound (no such sensor)", err)
	}
	want := []string{"ensure sensor user", "tenant_has_no_account", "detail for tenant_has_no_account"}
	if diff := cmp.Diff(want, []string{pe.Op, pe.Code, pe.Detail}); diff != "" {
		t.Errorf("problem (-want +got):\n%s", diff)
	}
}

func TestInvalidIDsNeverReachTheProvisioner(t *testing.T) {
	t.Parallel()
	p := newProvisioner(t, provisionerclient.DefaultHeaderName)
	c := newClient(t, fast(p.srv.URL))
	if _, err := c.EnsureAccount(t.Context(), "t.1", ""); !errors.Is(err, fleet.ErrInvalidInput) {
		t.Errorf("EnsureAccount err = %v, want ErrInvalidInput", err)
	}
	if _, err := c.EnsureSensorUser(t.Context(), "t1", "s1.>"); !errors.Is(err, fleet.ErrInvalidInput) {
		t.Errorf("EnsureSensorUser err = %v, want ErrInvalidInput", err)
	}
	if err := c.RevokeUser(t.Context(), "", userKey); !errors.Is(err, fleet.ErrInvalidInput) {
		t.Errorf("RevokeUser err = %v, want ErrInvalidInput", err)
	}
	p.wantCalls(t, 0)
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	ok := reply{status: http.StatusCreated, body: map[string]any{"accountPubKey": accountKey}}

	t.Run("waits as told", func(t *testing.T) {
		t.Parallel()
		p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: 429, code: "rate_limited", retryAfter: "1"}, ok)
		c := newClient(t, fast(p.srv.URL))
		start := time.Now()
		if _, err := c.EnsureAccount(t.Context(), "t1", ""); err != nil {
			t.Fatalf("err = %v", err)
		}
		if got := time.Since(start); got < time.Second {
			t.Errorf("retried after %v, want at least the 1s Retry-After", got)
		}
		p.wantCalls(t, 2)
	})
	t.Run("beyond the call timeout gives up at once", func(t *testing.T) {
		t.Parallel()
		p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: 503, code: "nats_unavailable", retryAfter: "3600"}, ok)
		cfg := fast(p.srv.URL)
		cfg.Timeout = 5 * time.Second
		c := newClient(t, cfg)
		start := time.Now()
		_, err := c.EnsureAccount(t.Context(), "t1", "")
		if !errors.Is(err, fleet.ErrProvisionerUnavailable) {
			t.Fatalf("err = %v, want ErrProvisionerUnavailable", err)
		}
		if got := time.Since(start); got >= cfg.Timeout {
			t.Errorf("returned after %v, want before the %v timeout", got, cfg.Timeout)
		}
		p.wantCalls(t, 1)
	})
}

func TestBreakerOpensAndFailsFast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		answer    reply
		calls     int
		wantState string
		wantCalls int64
	}{
		{name: "5xx trips it", answer: reply{status: 503, code: "nats_unavailable"}, calls: 6, wantState: "open", wantCalls: 3},
		{name: "4xx does not", answer: reply{status: 400, code: "invalid_id"}, calls: 6, wantState: "closed", wantCalls: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvisioner(t, provisionerclient.DefaultHeaderName, tt.answer)
			cfg := fast(p.srv.URL)
			cfg.MaxRetries = -1
			cfg.Breaker = provisionerclient.BreakerConfig{ConsecutiveFailures: 3, OpenTimeout: time.Hour}
			c := newClient(t, cfg)
			for i := 0; i < tt.calls; i++ {
				if _, err := c.EnsureAccount(t.Context(), "t1", ""); err == nil {
					t.Fatalf("call %d succeeded, want an error", i)
				}
			}
			if got := c.BreakerState(); got != tt.wantState {
				t.Errorf("breaker = %q, want %q", got, tt.wantState)
			}
			p.wantCalls(t, tt.wantCalls)
		})
	}
}

func TestOpenBreakerErrorAndRetriesStopWhenItOpens(t *testing.T) {
	t.Parallel()
	p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: 500, code: "internal"})
	cfg := fast(p.srv.URL)
	cfg.MaxRetries = 10
	cfg.Breaker = provisionerclient.BreakerConfig{ConsecutiveFailures: 2, OpenTimeout: time.Hour}
	c := newClient(t, cfg)
	_, err := c.EnsureAccount(t.Context(), "t1", "")
	if !errors.Is(err, fleet.ErrProvisionerUnavailable) {
		t.Fatalf("err = %v, want ErrProvisionerUnavailable", err)
	}
	p.wantCalls(t, 2) // retries stop once the breaker opens
	_, err = c.EnsureSensorUser(t.Context(), "t1", "s1")
	if !errors.Is(err, fleet.ErrProvisionerUnavailable) {
		t.Errorf("open breaker err = %v, want ErrProvisionerUnavailable", err)
	}
}

func TestBreakerRecovers(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: 503, code: "nats_unavailable"})
	cfg := fast(p.srv.URL)
	cfg.MaxRetries = -1
	cfg.Breaker = provisionerclient.BreakerConfig{ConsecutiveFailures: 2, OpenTimeout: 50 * time.Millisecond}
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	c := newClient(t, cfg)
	for i := 0; i < 2; i++ {
		_, _ = c.EnsureAccount(t.Context(), "t1", "")
	}
	if got := c.BreakerState(); got != "open" {
		t.Fatalf("breaker = %q, want open", got)
	}
	p.setScript(reply{status: http.StatusOK, body: map[string]any{"accountPubKey": accountKey}})
	waitFor(t, 5*time.Second, func() bool { return c.BreakerState() == "half-open" })
	if _, err := c.EnsureAccount(t.Context(), "t1", ""); err != nil {
		t.Fatalf("trial call: %v", err)
	}
	if got := c.BreakerState(); got != "closed" {
		t.Errorf("breaker = %q, want closed", got)
	}

	var got []map[string]string
	for line := range strings.Lines(logs.String()) {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil || e["msg"] != "circuit breaker state changed" {
			continue
		}
		got = append(got, map[string]string{"name": e["name"].(string), "from": e["from"].(string), "to": e["to"].(string)})
	}
	want := []map[string]string{
		{"name": "nats-provisioner", "from": "closed", "to": "open"},
		{"name": "nats-provisioner", "from": "open", "to": "half-open"},
		{"name": "nats-provisioner", "from": "half-open", "to": "closed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state change logs (-want +got):\n%s", diff)
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the shared secret appears in the logs")
	}
}

func TestDisabledMakesNoCalls(t *testing.T) {
	t.Parallel()
	p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: http.StatusOK, body: map[string]any{}})
	c := newClient(t, provisionerclient.Config{Enabled: false, BaseURL: p.srv.URL, SharedSecret: secret})
	if c.Enabled() {
		t.Error("Enabled() = true, want false")
	}
	calls := map[string]func(ctx context.Context) error{
		"EnsureAccount":    func(ctx context.Context) error { _, err := c.EnsureAccount(ctx, "t1", ""); return err },
		"EnsureSensorUser": func(ctx context.Context) error { _, err := c.EnsureSensorUser(ctx, "t1", "s1"); return err },
		"RevokeUser":       func(ctx context.Context) error { return c.RevokeUser(ctx, accountKey, userKey) },
		"BackendCreds":     func(ctx context.Context) error { _, err := c.BackendCreds(ctx, ""); return err },
	}
	for name, call := range calls {
		if err := call(t.Context()); !errors.Is(err, fleet.ErrProvisionerDisabled) {
			t.Errorf("%s err = %v, want ErrProvisionerDisabled", name, err)
		}
	}
	p.wantCalls(t, 0)
}

func TestContextAndTimeoutBoundCalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		cancel  bool
		wantErr []error
	}{
		{name: "caller cancels", timeout: time.Minute, cancel: true, wantErr: []error{context.Canceled}},
		{name: "call timeout", timeout: 100 * time.Millisecond, wantErr: []error{fleet.ErrProvisionerUnavailable, context.DeadlineExceeded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			arrived := make(chan struct{}, 10)
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				arrived <- struct{}{}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			cfg := fast(srv.URL)
			cfg.Timeout = tt.timeout
			c := newClient(t, cfg)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancel {
				go func() { <-arrived; cancel() }()
			}
			done := make(chan error, 1)
			go func() { _, err := c.EnsureAccount(ctx, "t1", ""); done <- err }()
			select {
			case err := <-done:
				for _, want := range tt.wantErr {
					if !errors.Is(err, want) {
						t.Errorf("err = %v, want it to wrap %v", err, want)
					}
				}
			case <-time.After(10 * time.Second):
				t.Fatal("call not bounded by its context")
			}
			if got := c.BreakerState(); got != "closed" {
				t.Errorf("breaker = %q, want closed", got)
			}
		})
	}
}

func TestOversizedResponseRefused(t *testing.T) {
	t.Parallel()
	huge := append(append([]byte(`{"accountPubKey":"`+accountKey+`","pad":"`), bytes.Repeat([]byte("x"), 2<<20)...), '"', '}')
	p := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: http.StatusOK, body: huge})
	c := newClient(t, fast(p.srv.URL))
	_, err := c.EnsureAccount(t.Context(), "t1", "")
	if !errors.Is(err, fleet.ErrProvisionerUnavailable) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v, want ErrProvisionerUnavailable for an oversized body", err)
	}
	p.wantCalls(t, 1)
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	elsewhere := newProvisioner(t, provisionerclient.DefaultHeaderName, reply{status: http.StatusOK, body: map[string]any{"accountPubKey": accountKey}})
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	c := newClient(t, fast(redirector.URL))
	if _, err := c.EnsureAccount(t.Context(), "t1", ""); !errors.Is(err, fleet.ErrProvisionerUnavailable) {
		t.Errorf("err = %v, want ErrProvisionerUnavailable", err)
	}
	if got := elsewhere.calls.Load(); got != 0 {
		t.Errorf("redirect target got %d calls carrying the secret, want 0", got)
	}
}

func TestUnreachableProvisioner(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := newClient(t, fast(url))
	if _, err := c.BackendCreds(t.Context(), ""); !errors.Is(err, fleet.ErrProvisionerUnavailable) {
		t.Errorf("err = %v, want ErrProvisionerUnavailable", err)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     provisionerclient.Config
		wantErr bool
	}{
		{name: "disabled needs nothing", cfg: provisionerclient.Config{}},
		{name: "enabled", cfg: provisionerclient.Config{Enabled: true, BaseURL: "http://provisioner:8080", SharedSecret: secret}},
		{name: "enabled without URL", cfg: provisionerclient.Config{Enabled: true, SharedSecret: secret}, wantErr: true},
		{name: "relative URL", cfg: provisionerclient.Config{Enabled: true, BaseURL: "provisioner:8080", SharedSecret: secret}, wantErr: true},
		{name: "enabled without secret", cfg: provisionerclient.Config{Enabled: true, BaseURL: "http://provisioner:8080"}, wantErr: true},
		{name: "bad header name", cfg: provisionerclient.Config{Enabled: true, BaseURL: "http://p", SharedSecret: secret, HeaderName: "X Secret:"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := provisionerclient.New(tt.cfg)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if err == nil && c.BreakerState() != "closed" {
				t.Errorf("new breaker = %q, want closed", c.BreakerState())
			}
		})
	}
}

func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	waitfor.Until(t, limit, "the condition", cond)
}

type syncBuffer = logbuf.Buffer

// The client is the domain's provisioner port.
var _ fleet.Provisioner = (*provisionerclient.Client)(nil)
