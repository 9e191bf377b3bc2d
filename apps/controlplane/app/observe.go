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
		func(ctx context.Context) (map[string]float64, error) {
			counts, err := store.SensorsByState(ctx)
			if err != nil {
				return nil, err
			}
			out := make(map[string]float64, len(counts))
			for state, n := range counts {
				out[observe.Key(state)] = float64(n)
			}
			return out, nil
		})
	m.GaugeFunc("rxc_controlplane_commands", "Commands by delivery status (pending, accepted, failed, expired) and the outcome the sensor reported (applied, refused, none).",
		[]string{"status", "outcome"}, 10*time.Second,
		func(ctx context.Context) (map[string]float64, error) {
			counts, err := store.CommandsByOutcome(ctx)
			if err != nil {
				return nil, err
			}
			out := make(map[string]float64, len(counts))
			for k, n := range counts {
				out[observe.Key(k[0], k[1])] = float64(n)
			}
			return out, nil
		})
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
