package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rxc-project/rxc/adapters/grpcmtls"
	"github.com/rxc-project/rxc/adapters/httpapi/observe"
	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/apps/internal/buildinfo"
)

// countsBy reads a gauge's values from a count query: each count under
// the label values key makes of its key.
func countsBy[K comparable](count func(context.Context) (map[K]int64, error), key func(K) string) func(context.Context) (map[string]float64, error) {
	return func(ctx context.Context) (map[string]float64, error) {
		counts, err := count(ctx)
		if err != nil {
			return nil, err
		}
		out := make(map[string]float64, len(counts))
		for k, n := range counts {
			out[key(k)] = float64(n)
		}
		return out, nil
	}
}

// observed puts the access log and the request histogram around the API,
// and returns the metrics listener's handler: client_golang's registry
// (latency by route, Go and process metrics, build info, sensors by state,
// commands by outcome) together with the families legacy (the API's
// metrics handler) still writes as text.
func observed(api, legacy http.Handler, store *controlplanestore.Store, sensors *grpcmtls.Server, log *slog.Logger) (apiHandler, metricsHandler http.Handler) {
	m := observe.New("controlplane", buildinfo.Version)
	m.Registry().MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rxc_controlplane_grpc_connections", Help: "Sensors' gRPC connections open on this replica."},
			func() float64 { return float64(sensors.Stats().Connections) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "rxc_controlplane_grpc_event_streams", Help: "Sensors' event streams open on this replica."},
			func() float64 { return float64(sensors.Stats().EventStreams) }),
	)
	m.Text(func(w io.Writer) { textMetrics(legacy, w) })
	m.GaugeFunc("rxc_controlplane_sensors", "Sensors by lifecycle state, as PostgreSQL holds them.", []string{"state"}, 10*time.Second,
		countsBy(store.SensorsByState, func(state string) string { return observe.Key(state) }))
	m.GaugeFunc("rxc_controlplane_commands", "Commands by delivery status (pending, accepted, failed, expired) and the outcome the sensor reported (applied, refused, none).",
		[]string{"status", "outcome"}, 10*time.Second,
		countsBy(store.CommandsByOutcome, func(k [2]string) string { return observe.Key(k[0], k[1]) }))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return observe.Wrap(api, log, m), mux
}

// textMetrics asks the API for the families it writes as text.
func textMetrics(api http.Handler, w io.Writer) {
	req, err := http.NewRequest(http.MethodGet, "/metrics", nil)
	if err != nil {
		return
	}
	req.RemoteAddr = "127.0.0.1:0"
	rec := &textRecorder{header: http.Header{}}
	api.ServeHTTP(rec, req)
	if rec.status == 0 || rec.status == http.StatusOK {
		_, _ = w.Write(rec.body.Bytes())
	}
}

// textRecorder is an in-memory http.ResponseWriter.
type textRecorder struct {
	header http.Header
	body   bytes.Buffer
	status int
}

func (t *textRecorder) Header() http.Header { return t.header }
func (t *textRecorder) WriteHeader(code int) {
	if t.status == 0 {
		t.status = code
	}
}
func (t *textRecorder) Write(p []byte) (int, error) { return t.body.Write(p) }
