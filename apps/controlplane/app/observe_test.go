package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rxc-project/rxc/apps/controlplane/app"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/internal/logbuf"
)

// A journey at debug level: every log record parses with each key once
// (the adapters used to repeat "component"), each request leaves one info
// access record without the password, cookies or tokens, and /metrics is
// client_golang's exposition with latency by route, Go and process
// metrics, build info, sensors by state, commands by outcome and the
// families written as text.
func TestLogsAccessLogAndMetrics(t *testing.T) {
	prov := provisionertest.Start(t, provisionertest.Options{})
	p := startPlane(t, prov, func(c *app.ServeConfig) { c.LogLevel = "debug" })

	p.login()
	p.provisionedTenant("acme", "Acme")
	s := p.enrol("acme")
	p.must("POST", "/api/sensors/"+s.enr.SensorID+"/commands", map[string]string{"action": "start"}, "", 202, nil)
	if status, _ := p.do("GET", "/api/nope?token=query-secret", nil, "bearer-secret"); status != 404 {
		t.Fatalf("unknown route: %d", status)
	}

	resp, err := http.Get("http://" + p.Server.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not valid exposition text: %v\n%s", err, body)
	}
	for _, bad := range badMetricNames(fams, "controlplane") {
		t.Errorf("/metrics: %s", bad)
	}
	for _, name := range []string{
		"rxc_controlplane_http_request_duration_seconds", "go_goroutines", "process_cpu_seconds_total", "rxc_controlplane_build_info",
		"rxc_controlplane_sensors", "rxc_controlplane_commands", "rxc_controlplane_http_requests_total", "rxc_controlplane_status_messages_total", "rxc_controlplane_provisioner_breaker_state",
	} {
		if fams[name] == nil {
			t.Errorf("/metrics has no %s", name)
		}
	}
	label := func(name string, want map[string]string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			return -1
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			}
		}
		return -1
	}
	if n := label("rxc_controlplane_http_request_duration_seconds", map[string]string{"route": "POST /api/tenants", "method": "POST", "code": "201"}); n != 1 {
		t.Errorf("latency histogram for POST /api/tenants 201 counts %v, want 1", n)
	}
	if n := label("rxc_controlplane_http_request_duration_seconds", map[string]string{"route": "unmatched", "code": "404"}); n != 1 {
		t.Errorf("latency histogram for unmatched 404 counts %v, want 1", n)
	}
	if n := label("rxc_controlplane_sensors", map[string]string{"state": "pending"}); n != 0 {
		t.Errorf("rxc_controlplane_sensors{state=pending} = %v, want 0", n)
	}
	var sensors float64
	for _, st := range []string{"online", "offline", "running"} {
		if v := label("rxc_controlplane_sensors", map[string]string{"state": st}); v > 0 {
			sensors += v
		}
	}
	if sensors != 1 {
		t.Errorf("rxc_controlplane_sensors over enrolled states = %v, want the one sensor\n%s", sensors, body)
	}
	if n := label("rxc_controlplane_commands", map[string]string{"status": "accepted", "outcome": "none"}) + label("rxc_controlplane_commands", map[string]string{"status": "accepted", "outcome": "applied"}); n < 0 {
		t.Errorf("rxc_controlplane_commands has no accepted command\n%s", body)
	}
	if n := label("rxc_controlplane_build_info", map[string]string{"service": "controlplane"}); n != 1 {
		t.Errorf("rxc_controlplane_build_info{service=controlplane} = %v", n)
	}
	names := map[string]bool{}
	for name, f := range fams {
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[name+suffix] = true
			}
		}
	}
	checkDashboard(t, names)

	p.stop()
	logs := p.Logs()
	if dups := logbuf.DuplicateKeys(logs); len(dups) > 0 {
		t.Fatalf("log records with a key twice:\n%s", strings.Join(dups, "\n"))
	}
	for _, secret := range []string{opPassword, "query-secret", "bearer-secret", s.enr.SensorToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds a secret %q", secret)
		}
	}
	access := map[string]map[string]any{}
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["component"] != "access" {
			continue
		}
		if rec["level"] != "INFO" || rec["msg"] != "request" {
			t.Errorf("access record not at info: %s", line)
		}
		access[rec["route"].(string)] = rec
	}
	for route, status := range map[string]float64{"POST /api/auth/login": 204, "POST /api/tenants": 201, "unmatched": 404} {
		rec, ok := access[route]
		if !ok {
			t.Errorf("no access record for %s", route)
			continue
		}
		if rec["status"] != status || rec["method"] == nil || rec["duration_ms"] == nil || rec["peer"] == nil {
			t.Errorf("access record for %s: %v", route, rec)
		}
	}
	if rec := access["unmatched"]; rec != nil && rec["path"] != "/api/nope" {
		t.Errorf("access record path %v, want the path without its query", rec["path"])
	}
}

var metricName = regexp.MustCompile(`\b(?:rxc|go|process)_[a-z0-9_]+\b`)

// checkDashboard: deploy/grafana-dashboard.json parses, and every
// expression (panels and variables) names at least one metric, each of
// which the control plane exports.
func checkDashboard(t *testing.T, exported map[string]bool) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	exprs := map[string]string{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, tg := range p.Targets {
			exprs[fmt.Sprintf("panel %q query %d", p.Title, i)] = tg.Expr
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			exprs["variable "+v.Name] = q
		}
	}
	if d.Title == "" || len(exprs) < 10 {
		t.Fatalf("dashboard %q with %d expressions", d.Title, len(exprs))
	}
	for where, e := range exprs {
		used := metricName.FindAllString(e, -1)
		if len(used) == 0 {
			t.Errorf("%s names no metric: %s", where, e)
		}
		for _, m := range used {
			if !exported[m] {
				t.Errorf("%s uses %s, which the control plane does not export", where, m)
			}
		}
	}
}

// badMetricNames holds every family to the one naming scheme both services follow:
// rxc_<service>_<name> (Go's and the process's own families aside), counters ending in _total,
// durations and sizes in base units (seconds, bytes).
func badMetricNames(fams map[string]*dto.MetricFamily, service string) []string {
	var bad []string
	unit := regexp.MustCompile(`_(ms|msec|millis|milliseconds|us|microseconds|minutes|hours|kb|kib|mb|mib)(_|$)`)
	for name, f := range fams {
		switch {
		case strings.HasPrefix(name, "go_"), strings.HasPrefix(name, "process_"), strings.HasPrefix(name, "promhttp_"):
			continue
		case !strings.HasPrefix(name, "rxc_"+service+"_"):
			bad = append(bad, name+" is not rxc_"+service+"_…")
		case f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total"):
			bad = append(bad, name+" is a counter without _total")
		case unit.MatchString(name):
			bad = append(bad, name+" is not in base units")
		}
	}
	return bad
}

func TestBadMetricNamesFindsThem(t *testing.T) {
	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	fams := map[string]*dto.MetricFamily{
		"rxc_fleet_size":                     {Type: &gauge},
		"rxc_controlplane_logins":            {Type: &counter},
		"rxc_controlplane_wait_milliseconds": {Type: &gauge},
		"rxc_controlplane_ok_total":          {Type: &counter},
		"go_goroutines":                      {Type: &gauge},
	}
	if got := badMetricNames(fams, "controlplane"); len(got) != 3 {
		t.Fatalf("found %v, want the three wrong names", got)
	}
}
