package controlapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
)

func TestHealthReadinessMetrics(t *testing.T) {
	t.Parallel()
	var natsDown atomic.Bool
	natsDown.Store(true)
	e := newEnv(t, options{api: func(c *controlapi.Config) {
		c.ReadinessTimeout = 20 * time.Millisecond
		c.Readiness = []controlapi.Check{
			{Name: "postgres", Fn: func(context.Context) error { return nil }},
			{Name: "nats", Fn: func(context.Context) error {
				if natsDown.Load() {
					return errors.New("not connected")
				}
				return nil
			}},
		}
		c.Metrics = func(w io.Writer) { fmt.Fprintln(w, "rxc_test_breaker_state 2") }
	}})

	res := e.do(request{method: "GET", path: "/healthz"})
	if res.status != http.StatusNoContent || len(res.body) != 0 {
		t.Fatalf("healthz: %d %s", res.status, res.body)
	}
	res = e.do(request{method: "GET", path: "/readyz"})
	res.expect(t, "readyz with NATS down", http.StatusServiceUnavailable, "not_ready")
	if body := string(res.body); !strings.Contains(body, "failing checks: nats") || strings.Contains(body, "postgres") {
		t.Errorf("readyz names the wrong checks: %s", body)
	}
	natsDown.Store(false)
	if res := e.do(request{method: "GET", path: "/readyz"}); res.status != http.StatusNoContent {
		t.Fatalf("readyz with every check passing: %d %s", res.status, res.body)
	}
	e.do(request{method: "GET", path: "/nowhere"}).expect(t, "unknown route", http.StatusNotFound, "route_not_found")

	// The public API does not serve metrics; their own listener does.
	e.do(request{method: "GET", path: "/metrics"}).expect(t, "metrics on the public API", http.StatusNotFound, "route_not_found")
	res = e.metrics()
	if res.status != http.StatusOK || !strings.HasPrefix(res.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("metrics: %d %s", res.status, res.header.Get("Content-Type"))
	}
	for _, line := range []string{
		"# TYPE rxc_controlplane_http_requests_total counter",
		`rxc_controlplane_http_requests_total{route="POST /api/auth/login",status="2xx"} 1`,
		`rxc_controlplane_http_requests_total{route="GET /healthz",status="2xx"} 1`,
		`rxc_controlplane_http_requests_total{route="GET /readyz",status="2xx"} 1`,
		`rxc_controlplane_http_requests_total{route="GET /readyz",status="5xx"} 1`,
		`rxc_controlplane_http_requests_total{route="unmatched",status="4xx"} 2`,
		`rxc_controlplane_feature_enabled{feature="messaging"} 1`,
		`rxc_controlplane_feature_enabled{feature="provisioning"} 0`,
		"rxc_test_breaker_state 2",
	} {
		if !strings.Contains(string(res.body), line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, res.body)
		}
	}

	// A check that hangs counts as failing once the timeout passes.
	hanging := e.variant(t, func(c *controlapi.Config) {
		c.Readiness = []controlapi.Check{{Name: "hangs", Fn: func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}}}
	})
	res = hanging.do(request{method: "GET", path: "/readyz"})
	res.expect(t, "readyz with a hanging check", http.StatusServiceUnavailable, "not_ready")
	if !strings.Contains(string(res.body), "failing checks: hangs") {
		t.Errorf("readyz does not name the hanging check: %s", res.body)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, options{})
	valid := func() controlapi.Config {
		return controlapi.Config{Fleet: e.fleet, Operators: e.ops, CACertificatePEM: e.ca.CACertificatePEM}
	}
	tests := []struct {
		name   string
		change func(*controlapi.Config)
	}{
		{"no fleet", func(c *controlapi.Config) { c.Fleet = nil }},
		{"no operators", func(c *controlapi.Config) { c.Operators = nil }},
		{"no CA certificate", func(c *controlapi.Config) { c.CACertificatePEM = nil }},
		{"provisioning without a NATS URL", func(c *controlapi.Config) { c.ProvisioningEnabled = true }},
		{"origin with a path", func(c *controlapi.Config) { c.AllowedOrigins = []string{"https://console.example/app"} }},
		{"origin without scheme", func(c *controlapi.Config) { c.AllowedOrigins = []string{"console.example"} }},
		{"negative rate", func(c *controlapi.Config) { c.RedeemRate.PerMinute = -1 }},
		{"unnamed check", func(c *controlapi.Config) {
			c.Readiness = []controlapi.Check{{Fn: func(context.Context) error { return nil }}}
		}},
	}
	if _, err := controlapi.New(valid()); err != nil {
		t.Fatalf("New(valid config) = %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.change(&cfg)
			if _, err := controlapi.New(cfg); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
}
