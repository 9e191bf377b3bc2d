// Package observe is what the HTTP services share for being watched: an
// access log (one info record per request, or for a hot route chosen with
// WrapWith one summary record a minute with every refusal still on its
// own; never a header, query string or body, so no secret reaches it) and
// Prometheus metrics with client_golang (request latency histograms by
// route, Go runtime and process metrics, build information, gauges read on
// each scrape, and families a service still writes as text).
package observe

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rxc-project/rxc/adapters/httpapi/statusrec"
)

// Metrics is one service's registry.
type Metrics struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec
	mu       sync.Mutex
	text     []func(io.Writer)
}

// New registers the Go and process collectors, rxc_controlplane_build_info and the
// request duration histogram for service.
func New(service, version string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rxc_controlplane_build_info", Help: "Build of the running service (always 1).",
	}, []string{"service", "version"})
	build.WithLabelValues(service, version).Set(1)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rxc_controlplane_http_request_duration_seconds",
		Help:    "HTTP requests by route (the registered pattern, or unmatched/preflight), method and status code, from the first byte read to the last written.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"route", "method", "code"})
	reg.MustRegister(build, duration)
	return &Metrics{reg: reg, duration: duration}
}

// Registry is the service's registry, for collectors of its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Text adds families that write writes in the Prometheus text format (for
// counters a service kept as text); they are parsed on every scrape and
// served with the rest. A family name must not also be registered.
func (m *Metrics) Text(write func(io.Writer)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.text = append(m.text, write)
}

// Handler serves the metrics (text or protobuf, as the scraper asks).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.reg, prometheus.GathererFunc(m.gatherText)}, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	})
}

func (m *Metrics) gatherText() ([]*dto.MetricFamily, error) {
	m.mu.Lock()
	writers := append([]func(io.Writer){}, m.text...)
	m.mu.Unlock()
	var buf bytes.Buffer
	for _, w := range writers {
		w(&buf)
	}
	if buf.Len() == 0 {
		return nil, nil
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(fams))
	for _, f := range fams {
		out = append(out, f)
	}
	return out, nil
}

// GaugeFunc registers a gauge family with one label whose values read
// reports on each scrape (at most every minAge; read gets a bounded
// context). A failed read keeps the last values and counts in
// rxc_controlplane_metrics_read_errors_total.
func (m *Metrics) GaugeFunc(name, help string, labels []string, minAge time.Duration, read func(ctx context.Context) (map[string]float64, error)) {
	c := &gaugeFunc{desc: prometheus.NewDesc(name, help, labels, nil), labels: len(labels), read: read, minAge: minAge,
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "rxc_controlplane_metrics_read_errors_total", Help: "Failed reads of gauges computed at scrape time.", ConstLabels: prometheus.Labels{"family": name}})}
	m.reg.MustRegister(c)
}

// gaugeFunc's values are keyed by their label values joined with "\x00".
type gaugeFunc struct {
	desc   *prometheus.Desc
	labels int
	read   func(ctx context.Context) (map[string]float64, error)
	minAge time.Duration
	errors prometheus.Counter

	mu   sync.Mutex
	at   time.Time
	last map[string]float64
}

// Describe and Collect include the error counter, so that a scrape shows
// the failure of its own read.
func (g *gaugeFunc) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.desc
	g.errors.Describe(ch)
}

func (g *gaugeFunc) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil || time.Since(g.at) >= g.minAge {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		vals, err := g.read(ctx)
		cancel()
		if err != nil {
			g.errors.Inc()
		} else {
			g.last, g.at = vals, time.Now()
		}
	}
	g.errors.Collect(ch)
	for key, v := range g.last {
		lv := splitKey(key, g.labels)
		if lv == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, lv...)
	}
}

// Key joins label values for GaugeFunc's map.
func Key(values ...string) string {
	var b bytes.Buffer
	for i, v := range values {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(v)
	}
	return b.String()
}

func splitKey(key string, n int) []string {
	parts := bytes.Split([]byte(key), []byte{0})
	if len(parts) != n {
		return nil
	}
	out := make([]string, n)
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// Wrap returns next with the access log and the request histogram around
// it. The route is the pattern next's ServeMux matched (http.Request's
// Pattern, which the mux sets on the request it is given), "preflight" for
// CORS preflights and "unmatched" otherwise, so the label set is bounded.
// The record holds method, route, path (no query), status, bytes written,
// duration and the peer address: never headers, query strings or bodies.
// m may be nil (no metrics).
func Wrap(next http.Handler, log *slog.Logger, m *Metrics) http.Handler {
	return WrapWith(next, log, Options{Metrics: m})
}

// Options tune WrapWith.
type Options struct {
	// Metrics records every request in rxc_controlplane_http_request_duration_seconds
	// (nil: not).
	Metrics *Metrics
	// Observe, when set, is called once per request with its status and
	// duration, for a service's own metrics.
	Observe func(r *http.Request, code int, d time.Duration)
	// Summarise picks the requests whose answers below 400 are not logged
	// one by one: they are counted, and one info record
	// ("requests summarised": count, window_s) per SummaryEvery gives the
	// count (written by the first such request after the window ends).
	// A refusal (4xx, 5xx) is always logged on its own. Nil: every request
	// is logged.
	Summarise func(r *http.Request) bool
	// SummaryEvery is the summary's window (default one minute).
	SummaryEvery time.Duration
	// SummaryName names the summarised requests in the summary record's
	// "route" (default "summarised").
	SummaryName string
}

// WrapWith is Wrap with options: a service's own metrics hook and a
// summarised access log for a hot route.
func WrapWith(next http.Handler, log *slog.Logger, o Options) http.Handler {
	if o.SummaryEvery <= 0 {
		o.SummaryEvery = time.Minute
	}
	if o.SummaryName == "" {
		o.SummaryName = "summarised"
	}
	sum := &summary{log: log, every: o.SummaryEvery, name: o.SummaryName, start: time.Now()}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := recorders.Get().(*recorder)
		*rec = recorder{statusrec.Recorder{ResponseWriter: w}}
		defer func() { // a handler's panic is logged too
			defer func() { *rec = recorder{}; recorders.Put(rec) }()
			d := time.Since(start)
			code := rec.Code()
			if o.Observe != nil {
				o.Observe(r, code, d)
			}
			if o.Metrics != nil {
				o.Metrics.duration.WithLabelValues(routeOf(r), r.Method, strconv.Itoa(code)).Observe(d.Seconds())
			}
			if code < 400 && o.Summarise != nil && o.Summarise(r) {
				sum.add(start.Add(d))
				return
			}
			if !log.Enabled(r.Context(), slog.LevelInfo) {
				return
			}
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				host = r.RemoteAddr
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("method", r.Method), slog.String("route", routeOf(r)), slog.String("path", r.URL.Path),
				slog.Int("status", code), slog.Int64("bytes", rec.Bytes()),
				slog.Float64("duration_ms", float64(d.Microseconds())/1000), slog.String("peer", host))
		}()
		next.ServeHTTP(rec, r)
	})
}

func routeOf(r *http.Request) string {
	switch {
	case r.Pattern != "":
		return r.Pattern
	case r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "":
		return "preflight"
	default:
		return "unmatched"
	}
}

// summary counts summarised requests and logs their count once per window.
type summary struct {
	log   *slog.Logger
	every time.Duration
	name  string
	start time.Time // monotonic base of windowNs

	count    atomic.Int64
	windowNs atomic.Int64 // the current window's start, since start
}

func (s *summary) add(now time.Time) {
	s.count.Add(1)
	t := int64(now.Sub(s.start))
	from := s.windowNs.Load()
	if t-from < int64(s.every) || !s.windowNs.CompareAndSwap(from, t) {
		return
	}
	n := s.count.Swap(0)
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "requests summarised",
		slog.String("route", s.name), slog.Int64("count", n), slog.Float64("window_s", time.Duration(t-from).Seconds()))
}

// recorders are reused: a handler may not use its ResponseWriter after
// it returned.
var recorders = sync.Pool{New: func() any { return new(recorder) }}

// recorder notes the status and size of an answer.
type recorder struct {
	statusrec.Recorder
}

// Flush passes flushes through for streamed answers.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
