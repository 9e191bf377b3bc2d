package app

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerapi"
)

// metrics are the provisioner's Prometheus metrics, on a registry of its
// own (several servers may run in one process in tests).
type metrics struct {
	reg      *prometheus.Registry
	latency  *prometheus.HistogramVec
	accounts prometheus.Gauge
	users    *prometheus.GaugeVec
	unpushed prometheus.Gauge
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rxc_provisioner_http_request_duration_seconds",
			Help:    "HTTP request latency by route, method and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method", "code"}),
		accounts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rxc_provisioner_accounts", Help: "Accounts in the store (operator's SYS and CONTROL included), as of the last snapshot refresh.",
		}),
		users: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rxc_provisioner_users", Help: "Active (unrevoked) users by kind, as of the last snapshot refresh.",
		}, []string{"kind"}),
		unpushed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rxc_provisioner_unpushed_accounts", Help: "Accounts whose current JWT has not reached NATS yet, as of the last snapshot refresh.",
		}),
	}
	boolGauge := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.latency, m.accounts, m.users, m.unpushed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_consumers_missing", Help: "Active sensor users without their durable consumer: as of the last repair pass, and while one runs the ones it has not created yet.",
		}, func() float64 { return float64(s.consumersMissing.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_undeliverable_accounts",
			Help: "Accounts whose current JWT NATS refused as undeliverable (over its maximum payload): their latest revocations are not in force; retried in the background.",
		}, func() float64 {
			if !s.built.Load() {
				return 0
			}
			return float64(len(s.svc.Undelivered()))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_nats_connected", Help: "1 while both NATS connections (SYS and CONTROL admin) are up.",
		}, func() float64 { return boolGauge(s.NATSReady()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_database_started", Help: "1 once serve has reached PostgreSQL and finished starting; 0 while it serves the resolver from the snapshot.",
		}, func() float64 { return boolGauge(s.built.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "rxc_provisioner_resolver_snapshot_answers_total", Help: "Resolver answers given from the last known copy because PostgreSQL failed.",
		}, func() float64 { return float64(s.last.Served()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_resolver_snapshot_accounts", Help: "Accounts in the last known copy the resolver falls back to.",
		}, func() float64 { return float64(s.last.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_command_stream_consumer_limit",
			Help: "Consumers the command stream may hold as nats-server applies it (stream, account or server default; -1 none), at the last check.",
		}, func() float64 {
			if !s.built.Load() {
				return 0
			}
			l, _ := s.nats.LastConsumerLimit()
			return float64(l.Effective)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_command_stream_consumers", Help: "Consumers the command stream held at the last check.",
		}, func() float64 {
			if !s.built.Load() {
				return 0
			}
			l, _ := s.nats.LastConsumerLimit()
			return float64(l.Consumers)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_command_stream_crowded",
			Help: "1 when the command stream has workqueue or interest retention and more consumers than COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS: every ack scans them all; large fleets want limits retention.",
		}, func() float64 {
			if !s.built.Load() {
				return 0
			}
			l, ok := s.nats.LastConsumerLimit()
			return boolGauge(ok && l.Crowded())
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "rxc_provisioner_command_stream_capped",
			Help: "1 when nats-server caps the command stream below COMMAND_STREAM_MAX_CONSUMERS: sensors beyond the cap get no consumer.",
		}, func() float64 {
			if !s.built.Load() {
				return 0
			}
			l, ok := s.nats.LastConsumerLimit()
			return boolGauge(ok && l.Caps())
		}),
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// route names a request's route for the latency metric without letting
// paths (account keys, typos) create label values.
func route(r *http.Request) string {
	p := r.URL.Path
	switch {
	case p == provisionerapi.ResolverPath:
		return "resolver_index"
	case strings.HasPrefix(p, provisionerapi.ResolverPath):
		return "resolver_account"
	}
	switch p {
	case "/healthz", "/readyz", "/metrics", "/accounts", "/users", "/backend-user", "/revoke":
		return p
	}
	return "other"
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// instrument records every request's latency.
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		method := r.Method
		if method != http.MethodGet && method != http.MethodPost {
			method = "other"
		}
		m.latency.WithLabelValues(route(r), method, strconv.Itoa(rec.code)).Observe(time.Since(start).Seconds())
	})
}
