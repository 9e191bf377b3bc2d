package promtext_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rxc-project/rxc/adapters/promtext"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.prom")

// write produces every shape the services use: a labelled counter with
// label values needing escapes, a labelled gauge, single samples, an empty
// family, a help text needing escapes, and a family of counts by one label.
func write(w *promtext.Writer) {
	w.Family("rxc_controlplane_http_requests_total", promtext.Counter, "HTTP requests by route pattern and status class.")
	w.Sample("rxc_controlplane_http_requests_total", 3, "route", "GET /api/sensors/{id}", "status", "2xx")
	w.Sample("rxc_controlplane_http_requests_total", 1, "route", `odd "route" \ with`+"\nnewline", "status", "4xx")
	w.Family("rxc_controlplane_feature_enabled", promtext.Gauge, "Whether an optional integration is switched on (1) or off (0).")
	w.Sample("rxc_controlplane_feature_enabled", promtext.Bool(true), "feature", "chat")
	w.Sample("rxc_controlplane_feature_enabled", promtext.Bool(false), "feature", "messaging")
	w.Single("rxc_controlplane_login_failures_total", promtext.Counter, "Failed or held-back operator logins.", 0)
	w.Single("rxc_controlplane_events_written_total", promtext.Counter, "Events inserted into PostgreSQL.", 18446744073709551615>>1)
	w.Family("rxc_empty_total", promtext.Counter, "A family without samples yet.")
	w.Single("rxc_gauge", promtext.Gauge, `A negative gauge; its help has a backslash \ and`+"\na newline.", -2)
	w.Counts("rxc_controlplane_status_messages_total", promtext.Counter, "Sensor status messages by outcome.", "outcome",
		promtext.Count{Value: "applied", N: 7}, promtext.Count{Value: `odd "outcome"`, N: 0})
}

func TestGolden(t *testing.T) {
	var buf bytes.Buffer
	w := promtext.NewWriter(&buf)
	write(w)
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden.prom")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestParses holds the output to the format: Prometheus's own parser (as
// the metrics handler uses it) reads it back with the escaped values intact.
func TestParses(t *testing.T) {
	var buf bytes.Buffer
	write(promtext.NewWriter(&buf))
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&buf)
	if err != nil {
		t.Fatalf("not valid exposition text: %v", err)
	}
	req := families["rxc_controlplane_http_requests_total"]
	if req == nil || len(req.GetMetric()) != 2 {
		t.Fatalf("rxc_controlplane_http_requests_total: %v", req)
	}
	got := req.GetMetric()[1].GetLabel()[0].GetValue()
	if want := `odd "route" \ with` + "\nnewline"; got != want {
		t.Errorf("label value read back = %q, want %q", got, want)
	}
	if got, want := families["rxc_gauge"].GetHelp(), `A negative gauge; its help has a backslash \ and`+"\na newline."; got != want {
		t.Errorf("help read back = %q, want %q", got, want)
	}
	if got := families["rxc_gauge"].GetMetric()[0].GetGauge().GetValue(); got != -2 {
		t.Errorf("rxc_gauge = %v, want -2", got)
	}
}

func TestOddLabelsPanic(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Sample with an odd label count did not panic")
		}
	}()
	labels := strings.Fields("only-a-name") // built at run time: the linter refuses the literal
	promtext.NewWriter(&bytes.Buffer{}).Sample("x", 1, labels...)
}

type failing struct{ n int }

func (f *failing) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

func TestKeepsFirstError(t *testing.T) {
	f := &failing{}
	w := promtext.NewWriter(f)
	write(w)
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Err() = %v, want the write error", err)
	}
	if f.n != 1 {
		t.Errorf("writes after the first error: %d, want 1 in all", f.n)
	}
}
