package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rxc-project/rxc/internal/logbuf"
)

func scrape(t *testing.T, h http.Handler) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatalf("exposition: %v\n%s", err, rec.Body)
	}
	out := map[string]string{}
	for name, f := range fams {
		out[name] = f.String()
	}
	return out
}

// Routes are the mux's patterns (bounded), the record has no header,
// query or body, and the histogram counts by route, method and code.
func TestWrapLogsAndMeasuresByRoute(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "thing") })
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	var logs logbuf.Buffer
	m := New("test", "v1.2.3")
	h := Wrap(mux, logs.Logger().With("component", "access"), m)

	for _, req := range []*http.Request{
		httptest.NewRequest(http.MethodGet, "/things/1?token=query-secret", nil),
		httptest.NewRequest(http.MethodGet, "/things/2", nil),
		httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(`{"password":"body-secret"}`)),
		httptest.NewRequest(http.MethodGet, "/nope/x1", nil),
		httptest.NewRequest(http.MethodGet, "/nope/x2", nil),
	} {
		req.Header.Set("Authorization", "Bearer header-secret")
		req.Header.Set("Cookie", "session=cookie-secret")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	text := logs.String()
	for _, s := range []string{"query-secret", "body-secret", "header-secret", "cookie-secret"} {
		if strings.Contains(text, s) {
			t.Fatalf("the access log holds %q:\n%s", s, text)
		}
	}
	if d := logbuf.DuplicateKeys(text); len(d) > 0 {
		t.Fatal(d)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records, want one per request:\n%s", len(recs), text)
	}
	first := recs[0]
	if first["level"] != "INFO" || first["route"] != "GET /things/{id}" || first["path"] != "/things/1" || first["status"] != 200.0 || first["bytes"] != 5.0 || first["peer"] != "192.0.2.1" {
		t.Fatalf("record %v", first)
	}
	if recs[3]["route"] != "unmatched" || recs[3]["status"] != 404.0 {
		t.Fatalf("unmatched record %v", recs[3])
	}

	fams := scrape(t, m.Handler())
	hist := fams["rxc_controlplane_http_request_duration_seconds"]
	for _, want := range []string{`value:"GET /things/{id}"`, `value:"POST /login"`, `value:"unmatched"`, `sample_count:2`} {
		if !strings.Contains(hist, want) {
			t.Errorf("histogram lacks %s:\n%s", want, hist)
		}
	}
	if strings.Contains(hist, "/nope/x1") || strings.Contains(hist, "/things/1") {
		t.Errorf("raw paths became labels:\n%s", hist)
	}
	if !strings.Contains(fams["rxc_controlplane_build_info"], `value:"v1.2.3"`) || fams["go_goroutines"] == "" || fams["process_cpu_seconds_total"] == "" {
		t.Errorf("build, Go or process metrics missing: %v", fams["rxc_controlplane_build_info"])
	}
}

// Text families are served with the registry's; gauges are read at scrape
// time, at most every minAge, and a failed read keeps the last values and
// is counted.
func TestTextFamiliesAndGaugeFuncs(t *testing.T) {
	m := New("test", "dev")
	m.Text(func(w io.Writer) {
		fmt.Fprint(w, "# HELP legacy_total A counter written as text.\n# TYPE legacy_total counter\nlegacy_total{outcome=\"ok\"} 7\n")
	})
	reads, fail := 0, false
	m.GaugeFunc("things", "Things by kind.", []string{"kind", "state"}, 0, func(context.Context) (map[string]float64, error) {
		reads++
		if fail {
			return nil, errors.New("database down")
		}
		return map[string]float64{Key("a", "on"): float64(reads), Key("b", "off"): 0}, nil
	})
	fams := scrape(t, m.Handler())
	if !strings.Contains(fams["legacy_total"], "value:7") {
		t.Fatalf("text family: %v", fams["legacy_total"])
	}
	if !strings.Contains(fams["things"], `value:"a"`) || !strings.Contains(fams["things"], `value:"off"`) || !strings.Contains(fams["things"], "value:1") {
		t.Fatalf("gauge: %v", fams["things"])
	}
	fail = true
	fams = scrape(t, m.Handler())
	if !strings.Contains(fams["things"], "value:1") || !strings.Contains(fams["rxc_controlplane_metrics_read_errors_total"], "value:1") {
		t.Fatalf("after a failed read: %v %v", fams["things"], fams["rxc_controlplane_metrics_read_errors_total"])
	}

	cached := New("test", "dev")
	n := 0
	cached.GaugeFunc("slow", "Read at most every hour.", []string{"k"}, time.Hour, func(context.Context) (map[string]float64, error) {
		n++
		return map[string]float64{Key("x"): 1}, nil
	})
	scrape(t, cached.Handler())
	scrape(t, cached.Handler())
	if n != 1 {
		t.Fatalf("read %d times within minAge, want 1", n)
	}
}

// WrapWith summarises the chosen requests' answers below 400 in one record
// per window, logs their refusals one by one, keeps every other request's
// record, and calls Observe for each request.
func TestWrapWithSummarisesAHotRoute(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hot/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "bad" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /cold", func(w http.ResponseWriter, r *http.Request) {})
	var logs logbuf.Buffer
	observed := map[int]int{}
	h := WrapWith(mux, logs.Logger(), Options{
		Observe:      func(r *http.Request, code int, d time.Duration) { observed[code]++ },
		Summarise:    func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/hot/") },
		SummaryEvery: 50 * time.Millisecond, SummaryName: "hot",
	})
	get := func(path string) { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil)) }
	for range 5 {
		get("/hot/1")
	}
	get("/hot/bad")
	get("/cold")
	time.Sleep(60 * time.Millisecond)
	get("/hot/2") // ends the window: the summary counts all six answers
	var records, summaries []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r["msg"] == "requests summarised" {
			summaries = append(summaries, r)
		} else {
			records = append(records, r)
		}
	}
	if len(records) != 2 || records[0]["status"] != 400.0 || records[0]["path"] != "/hot/bad" || records[1]["path"] != "/cold" {
		t.Fatalf("records %v: want the refusal and the cold route's, each on its own", records)
	}
	if len(summaries) != 1 || summaries[0]["count"] != 6.0 || summaries[0]["route"] != "hot" || summaries[0]["level"] != "INFO" {
		t.Fatalf("summaries %v: want one counting 6 answers", summaries)
	}
	if observed[200] != 7 || observed[400] != 1 { // six hot answers and the cold one
		t.Fatalf("Observe saw %v", observed)
	}
}
