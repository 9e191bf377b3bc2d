package app

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
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
	observe  *observers
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
	m.observe = newObservers(m.latency)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.latency, m.accounts, m.users, m.unpushed,
		gaugeFunc("rxc_provisioner_consumers_missing", "Active sensor users without their durable consumer: as of the last repair pass, and while one runs the ones it has not created yet.", func() float64 { return float64(s.consumersMissing.Load()) }),
		gaugeFunc("rxc_provisioner_consumers_offline", "Active sensors' consumers no live NATS node holds that the node-loss pass has yet to recreate: counted when a pass finds them, counting down as it recreates each; 0 when none.", func() float64 { return float64(s.consumersOffline.Load()) }),
		gaugeFunc("rxc_provisioner_nats_nodes_lost", "Command stream replicas (NATS nodes) offline or silent at the last node-loss look.", func() float64 { return float64(s.natsNodesLost.Load()) }),
		counterFunc("rxc_provisioner_consumers_recreated_total", "Sensor consumers recreated on a live NATS node because no live node held them (a node loss with COMMAND_CONSUMER_REPLICAS below COMMAND_STREAM_REPLICAS).", func() float64 { return float64(s.consumersRecreated.Load()) }),
		gaugeFunc("rxc_provisioner_undeliverable_accounts", "Accounts whose current JWT NATS refused as undeliverable (over its maximum payload): their latest revocations are not in force; retried in the background.", s.whenBuilt(func() float64 {
			return float64(len(s.svc.Undelivered()))
		})),
		gaugeFunc("rxc_provisioner_nats_connected", "1 while both NATS connections (SYS and CONTROL admin) are up.", func() float64 { return boolGauge(s.NATSReady()) }),
		gaugeFunc("rxc_provisioner_database_started", "1 once serve has reached PostgreSQL and finished starting; 0 while it serves the resolver from the snapshot.", func() float64 { return boolGauge(s.built.Load()) }),
		counterFunc("rxc_provisioner_resolver_snapshot_answers_total", "Resolver answers given from the last known copy because PostgreSQL failed.", func() float64 { return float64(s.last.Served()) }),
		gaugeFunc("rxc_provisioner_resolver_snapshot_accounts", "Accounts in the last known copy the resolver falls back to.", func() float64 { return float64(s.last.Len()) }),
		gaugeFunc("rxc_provisioner_command_stream_consumer_limit", "Consumers the command stream may hold as nats-server applies it (stream, account or server default; -1 none), at the last check.", s.whenBuilt(func() float64 {
			l, _ := s.nats.LastConsumerLimit()
			return float64(l.Effective)
		})),
		gaugeFunc("rxc_provisioner_command_stream_consumers", "Consumers the command stream held at the last check.", s.whenBuilt(func() float64 {
			l, _ := s.nats.LastConsumerLimit()
			return float64(l.Consumers)
		})),
		gaugeFunc("rxc_provisioner_command_stream_crowded", "1 when the command stream has workqueue or interest retention and more consumers than COMMAND_STREAM_WORKQUEUE_WARN_CONSUMERS: every ack scans them all; large fleets want limits retention.", s.whenBuilt(func() float64 {
			l, ok := s.nats.LastConsumerLimit()
			return boolGauge(ok && l.Crowded())
		})),
		gaugeFunc("rxc_provisioner_command_stream_capped", "1 when nats-server caps the command stream below COMMAND_STREAM_MAX_CONSUMERS: sensors beyond the cap get no consumer.", s.whenBuilt(func() float64 {
			l, ok := s.nats.LastConsumerLimit()
			return boolGauge(ok && l.Caps())
		})),
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// routes are the latency metric's route labels: paths (account keys,
// typos) never become label values.
var routes = [...]string{"resolver_index", "resolver_account", "/healthz", "/readyz", "/metrics", "/accounts", "/users", "/backend-user", "/revoke", "other"}

const routeOther = len(routes) - 1

// route indexes a request's route in routes.
func route(r *http.Request) int {
	p := r.URL.Path
	switch {
	case p == provisionerapi.ResolverPath:
		return 0
	case strings.HasPrefix(p, provisionerapi.ResolverPath):
		return 1
	}
	for i, name := range routes[2:routeOther] {
		if p == name {
			return i + 2
		}
	}
	return routeOther
}

// isResolver tells the resolver's requests (nats-server's, the hot path)
// from the rest: their access log is summarised.
func isResolver(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, provisionerapi.ResolverPath)
}

var methods = [...]string{http.MethodGet, http.MethodPost, "other"}

// codes are the statuses the provisioner answers; others are looked up
// by label each time.
var codes = [...]int{200, 201, 204, 304, 400, 401, 404, 405, 409, 413, 415, 500, 503}

// observers holds the histogram's series for every route, method and
// common code, each made on its first use (a series appears in /metrics
// once it has a sample, as with WithLabelValues): a request then records
// its latency without hashing label values or allocating.
type observers struct {
	vec  *prometheus.HistogramVec
	obs  [len(routes)][len(methods)][len(codes)]atomic.Pointer[observer]
	text [len(codes)]string
}

type observer struct{ prometheus.Observer }

func newObservers(vec *prometheus.HistogramVec) *observers {
	o := &observers{vec: vec}
	for i, c := range codes {
		o.text[i] = strconv.Itoa(c)
	}
	return o
}

func (o *observers) observe(r *http.Request, code int, d time.Duration) {
	rt, m := route(r), 2
	switch r.Method {
	case http.MethodGet:
		m = 0
	case http.MethodPost:
		m = 1
	}
	c := slices.Index(codes[:], code)
	if c < 0 {
		o.vec.WithLabelValues(routes[rt], methods[m], strconv.Itoa(code)).Observe(d.Seconds())
		return
	}
	slot := &o.obs[rt][m][c]
	ob := slot.Load()
	if ob == nil {
		ob = &observer{o.vec.WithLabelValues(routes[rt], methods[m], o.text[c])}
		slot.Store(ob) // a race stores the same series twice
	}
	ob.Observe(d.Seconds())
}

// gaugeFunc and counterFunc are the provisioner's function-backed metrics.
func gaugeFunc(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

func counterFunc(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
}

// whenBuilt is f once serve has reached PostgreSQL and built the service,
// 0 before.
func (s *Server) whenBuilt(f func() float64) func() float64 {
	return func() float64 {
		if !s.built.Load() {
			return 0
		}
		return f()
	}
}
