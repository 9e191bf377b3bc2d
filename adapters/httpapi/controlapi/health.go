package controlapi

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/rxc-project/rxc/adapters/httpapi/problem"
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
				a.log.Warn("readiness check failed", "check", c.Name, "error", err)
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
		problem.Write(w, r, problem.New(http.StatusServiceUnavailable, problem.CodeNotReady, "Not ready",
			"failing checks: "+strings.Join(names, ", ")))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// metrics writes Prometheus text: request counts, the feature switches, and
// whatever the application appends.
func (a *API) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	a.requestMetrics.write(bw)
	fmt.Fprintf(bw, "# HELP rxc_controlplane_feature_enabled Whether an optional integration is switched on (1) or off (0).\n")
	fmt.Fprintf(bw, "# TYPE rxc_controlplane_feature_enabled gauge\n")
	for _, f := range []struct {
		name string
		on   bool
	}{{"chat", a.analytics != nil && a.analytics.ChatConfigured()}, {"messaging", a.messaging}, {"provisioning", a.provisioning}} {
		fmt.Fprintf(bw, "rxc_controlplane_feature_enabled{feature=%q} %d\n", f.name, b2i(f.on))
	}
	fmt.Fprintf(bw, "# HELP rxc_login_failures_total Failed or held-back operator logins.\n")
	fmt.Fprintf(bw, "# TYPE rxc_login_failures_total counter\n")
	fmt.Fprintf(bw, "rxc_login_failures_total %d\n", a.loginFailures.Load())
	if a.extraMetrics != nil {
		a.extraMetrics(bw)
	}
	_ = bw.Flush()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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

func (m *requestMetrics) write(w *bufio.Writer) {
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
	fmt.Fprintf(w, "# HELP rxc_http_requests_total HTTP requests by route pattern and status class.\n")
	fmt.Fprintf(w, "# TYPE rxc_http_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(w, "rxc_http_requests_total{route=\"%s\",status=\"%s\"} %d\n", labelValue(k.route), k.class, counts[k])
	}
}

// labelValue escapes a Prometheus label value.
func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
