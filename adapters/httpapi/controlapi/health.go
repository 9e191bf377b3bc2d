package controlapi

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/rxc-project/rxc/adapters/promtext"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/problem"
)

// healthz is liveness: the process answers. It checks no dependency, so a
// database outage never gets the control plane restarted.
func (a *API) healthz(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNoContent)
}

// readyz runs every readiness check at once, each bounded by the timeout.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	failed := make([]bool, len(a.readiness))
	var wg sync.WaitGroup
	for i, c := range a.readiness {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), a.readyTimeout)
			defer cancel()
			if err := c.Fn(ctx); err != nil {
				a.log.Warn("readiness check failed", "check", c.Name, logkey.Error, err)
				failed[i] = true
			}
		})
	}
	wg.Wait()
	var names []string
	for i, f := range failed {
		if f {
			names = append(names, a.readiness[i].Name)
		}
	}
	if len(names) > 0 {
		problem.Write(w, r, problem.For(problem.CodeNotReady, "failing checks: "+strings.Join(names, ", ")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// metrics writes Prometheus text: request counts, the feature switches, and
// whatever the application appends.
func (a *API) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", promtext.ContentType)
	bw := bufio.NewWriter(w)
	p := promtext.NewWriter(bw)
	a.requestMetrics.write(p)
	p.Family("rxc_controlplane_feature_enabled", promtext.Gauge, "Whether an optional integration is switched on (1) or off (0).")
	for _, f := range []struct {
		name string
		on   bool
	}{{"chat", a.analytics != nil && a.analytics.ChatConfigured()}, {"messaging", a.messaging}, {"provisioning", a.provisioning}} {
		p.Sample("rxc_controlplane_feature_enabled", promtext.Bool(f.on), "feature", f.name)
	}
	p.Single("rxc_controlplane_login_failures_total", promtext.Counter, "Failed or held-back operator logins.", a.loginFailures.Load())
	p.Single("rxc_controlplane_audit_suppressed_total", promtext.Counter, "Refused requests without credentials not recorded one by one in the audit trail (over the per-address rate; counted in an audit.suppressed row).", a.auditGuard.suppressed.Load())
	if a.extraMetrics != nil {
		a.extraMetrics(bw)
	}
	_ = bw.Flush()
}

// requestMetrics counts requests by route pattern and status class. Both
// label sets are bounded: patterns are the registered routes (or
// "unmatched", "preflight"), classes 1xx to 5xx.
type requestMetrics struct {
	mu     sync.Mutex
	counts map[requestKey]uint64
}

type requestKey struct {
	route string
	class string
}

func (m *requestMetrics) add(route string, status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = make(map[requestKey]uint64)
	}
	m.counts[requestKey{route, fmt.Sprintf("%dxx", status/100)}]++
}

func (m *requestMetrics) write(p *promtext.Writer) {
	m.mu.Lock()
	keys := make([]requestKey, 0, len(m.counts))
	for k := range m.counts {
		keys = append(keys, k)
	}
	counts := make(map[requestKey]uint64, len(keys))
	for _, k := range keys {
		counts[k] = m.counts[k]
	}
	m.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].route != keys[j].route {
			return keys[i].route < keys[j].route
		}
		return keys[i].class < keys[j].class
	})
	p.Family("rxc_controlplane_http_requests_total", promtext.Counter, "HTTP requests by route pattern and status class.")
	for _, k := range keys {
		p.Sample("rxc_controlplane_http_requests_total", int64(counts[k]), "route", k.route, "status", k.class)
	}
}
