package controlapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/httpapi/controlapi"
	"github.com/rxc-project/rxc/adapters/misp"
	"github.com/rxc-project/rxc/adapters/misp/misptest"
	"github.com/rxc-project/rxc/adapters/openai"
	"github.com/rxc-project/rxc/adapters/openai/openaitest"
	"github.com/rxc-project/rxc/adapters/playbooks"
	"github.com/rxc-project/rxc/adapters/postgres/analyticsstore"
	"github.com/rxc-project/rxc/adapters/postgres/analyticsstore/eventseed"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/internal/logbuf"
	"github.com/rxc-project/rxc/internal/pgtest"
)

// Secrets the API must never show or log.
const (
	modelKey = "sk-model-key-5f1e0c2a9b7d"
	mispKey  = "misp-key-8c3d1a7e44f0"
	model    = "llama3.1:8b"
)

// Indicators: a public address MISP knows, a public one it does not, a
// private one that is never looked up, and a CVE.
const (
	knownIP   = "45.33.32.156"
	unknownIP = "93.184.216.34"
	privateIP = "10.0.0.5"
	log4shell = "CVE-2021-44228"
)

// logBuffer collects log lines from concurrent handlers.
type logBuffer = logbuf.Buffer

// world is the API with the real analytics service over PostgreSQL, a fake
// model server and a fake MISP (both speaking the real wire formats).
type world struct {
	*env
	events *pgxpool.Pool
	model  *openaitest.Server
	misp   *misptest.Server
	logs   *logBuffer
	// seen collects every response body, to search for secrets.
	seen *logBuffer
}

type worldOptions struct {
	intel             bool
	mispHangs         bool
	enrichmentTimeout time.Duration
	playbooks         bool
	ingestion         bool
	chatRate          controlapi.RateLimit
	modelKey          string // the key the API is configured with (default modelKey)
	answer            []string
}

var base = time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)

func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	ctx := context.Background()
	// Events live in a database of their own here: the API only needs the
	// tenant to exist in the fleet's store.
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	eventseed.EnsureTable(t, pool)
	store, err := analyticsstore.New(analyticsstore.Config{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if o.answer == nil {
		o.answer = []string{"The address ", knownIP, " belongs to ", "a known scanner."}
	}
	w := &world{events: pool, logs: &logBuffer{}, seen: &logBuffer{}}
	w.model = openaitest.New(t, modelKey, model, o.answer...)
	w.misp = misptest.New(t, mispKey, misptest.Attribute{Value: knownIP, Type: "ip-src", Category: "Network activity", EventInfo: "Mass scanning campaign"},
		misptest.Attribute{Value: log4shell, Type: "vulnerability", Category: "External analysis", EventInfo: "Log4Shell exploitation wave"})
	if o.mispHangs {
		w.misp.SetHang(true)
	}
	log := slog.New(slog.NewJSONHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	key := modelKey
	if o.modelKey != "" {
		key = o.modelKey
	}
	provider, err := openai.New(openai.Config{BaseURL: w.model.URL, APIKey: key, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := analytics.Config{
		Events: store, ChatEnabled: true, Model: model, Provider: provider, IngestionEnabled: o.ingestion,
		EnrichmentTimeout: o.enrichmentTimeout, Logger: log.With("component", "analytics"),
	}
	if o.intel {
		c, err := misp.New(misp.Config{URL: w.misp.URL, Key: mispKey, Timeout: o.enrichmentTimeout})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Intel = c
	}
	if o.playbooks {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "scanning.md"), []byte("---\ntitle: Scanner triage\n---\nBlock "+knownIP+" at the edge.\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		lib, err := playbooks.New(playbooks.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Playbooks = lib
	}
	svc, err := analytics.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.env = newEnv(t, options{api: func(c *controlapi.Config) {
		c.Analytics = svc
		c.ChatRate = o.chatRate
		c.Logger = log.With("component", "http")
	}})
	w.createTenant("acme")
	w.createTenant("other")
	return w
}

// get sends an operator GET and records the answer.
func (w *world) get(path string) response {
	w.t.Helper()
	res := w.do(request{method: "GET", path: path, operator: true})
	w.seen.Write(res.body)
	return res
}

type sseEvent struct {
	Event string
	Data  map[string]any
}

// ask posts a chat request and parses the event stream it answers.
func (w *world) ask(body any) (response, []sseEvent) {
	w.t.Helper()
	raw, ok := body.(string)
	if !ok {
		raw = jsonString(w.t, body)
	}
	res := w.do(request{method: "POST", path: "/api/analytics/chat", body: raw, operator: true})
	w.seen.Write(res.body)
	if res.status != http.StatusOK {
		return res, nil
	}
	if ct := res.header.Get("Content-Type"); ct != "text/event-stream" {
		w.t.Fatalf("chat answered %s", ct)
	}
	return res, parseSSE(w.t, bytes.NewReader(res.body))
}

func parseSSE(t testing.TB, r interface{ Read([]byte) (int, error) }) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatalf("event data is not JSON: %q", line)
			}
		}
	}
	return out
}

// summary condenses a stream: chips as "kind indicator title", the answer
// text, and the final event.
func summary(evs []sseEvent) (chips []string, answer, final string) {
	for _, e := range evs {
		switch e.Event {
		case "enrichment":
			chips = append(chips, fmt.Sprintf("%v %v %v", e.Data["kind"], e.Data["indicator"], e.Data["title"]))
		case "delta":
			answer += e.Data["text"].(string)
		case "done":
			final = fmt.Sprintf("done %v", e.Data["model"])
		case "error":
			final = fmt.Sprintf("error %v", e.Data["code"])
		}
	}
	return chips, answer, final
}

func snapshotWith(addrs ...string) map[string]any {
	var top []map[string]any
	for _, a := range addrs {
		top = append(top, map[string]any{"ip": a, "count": 3})
	}
	return map[string]any{"from": base.Format(time.RFC3339), "to": base.Add(time.Hour).Format(time.RFC3339), "topSources": top}
}

// noSecrets fails if a key appears in any answer or log line.
func (w *world) noSecrets(t *testing.T) {
	t.Helper()
	for what, text := range map[string]string{"a response": w.seen.String(), "a log line": w.logs.String()} {
		for _, secret := range []string{modelKey, mispKey} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains a secret (%.8s…)", what, secret)
			}
		}
	}
}

func TestAnalyticsOverview(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	eventseed.Seed(t, w.events,
		eventseed.Event{Tenant: "acme", Sensor: "s1", Time: at(5), Src: knownIP, Dest: privateIP, SignatureID: 2001, Signature: "ET SCAN Nmap", Category: "Attempted Recon", Severity: 2},
		eventseed.Event{Tenant: "acme", Sensor: "s2", Time: at(7), Src: knownIP, Dest: privateIP, SignatureID: 2001, Signature: "ET SCAN Nmap", Category: "Attempted Recon", Severity: 2, CVEs: []string{log4shell}},
		eventseed.Event{Tenant: "acme", Sensor: "s2", Time: at(8), Kind: "flow", Src: privateIP, Dest: unknownIP},
		eventseed.Event{Tenant: "other", Sensor: "s9", Time: at(6), Src: knownIP, Dest: privateIP, SignatureID: 2001, Signature: "ET SCAN Nmap", Severity: 2, CVEs: []string{log4shell}},
	)
	q := func(tenant string, from, to time.Time, extra string) string {
		return "/api/analytics/overview?tenantId=" + tenant + "&from=" + url.QueryEscape(from.Format(time.RFC3339)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339)) + extra
	}
	res := w.get(q("acme", base, base.Add(time.Hour), ""))
	if res.status != http.StatusOK {
		t.Fatalf("overview: %d %s", res.status, res.body)
	}
	var ov struct {
		TenantID      string `json:"tenantId"`
		From, To      time.Time
		BucketSeconds int `json:"bucketSeconds"`
		Totals        map[string]int
		Series        []struct {
			T              time.Time
			Events, Alerts int
		}
		TopSources, TopDestinations []map[string]any
		TopSignatures               []map[string]any
		CVEs                        []map[string]any `json:"cves"`
	}
	if err := json.Unmarshal(res.body, &ov); err != nil {
		t.Fatal(err)
	}
	if ov.TenantID != "acme" || !ov.From.Equal(base) || ov.BucketSeconds != 60 || len(ov.Series) != 60 {
		t.Errorf("envelope: tenant %q from %s bucket %d points %d", ov.TenantID, ov.From, ov.BucketSeconds, len(ov.Series))
	}
	if diff := cmp.Diff(map[string]int{"events": 3, "alerts": 2, "sensors": 2}, ov.Totals); diff != "" {
		t.Errorf("totals, acme only (-want +got):\n%s", diff)
	}
	if ov.Series[7].Events != 1 || ov.Series[7].Alerts != 1 || ov.Series[6].Events != 0 {
		t.Errorf("series around minute 7: %+v", ov.Series[5:9])
	}
	wantTop := []map[string]any{{"ip": knownIP, "count": 2.0}, {"ip": privateIP, "count": 1.0}}
	if diff := cmp.Diff(wantTop, ov.TopSources); diff != "" {
		t.Errorf("top sources (-want +got):\n%s", diff)
	}
	wantSig := []map[string]any{{"signatureId": 2001.0, "signature": "ET SCAN Nmap", "category": "Attempted Recon", "severity": 2.0, "count": 2.0}}
	if diff := cmp.Diff(wantSig, ov.TopSignatures); diff != "" {
		t.Errorf("top signatures (-want +got):\n%s", diff)
	}
	if len(ov.CVEs) != 1 || ov.CVEs[0]["id"] != log4shell || ov.CVEs[0]["count"] != 1.0 || ov.CVEs[0]["lastSeen"] == nil {
		t.Errorf("cves: %v", ov.CVEs)
	}

	// Empty lists are lists, never null.
	res = w.get(q("other", base.Add(2*time.Hour), base.Add(3*time.Hour), "&limit=5"))
	for _, k := range []string{`"topSources":[]`, `"topSignatures":[]`, `"cves":[]`, `"events":0`} {
		if !strings.Contains(string(res.body), k) {
			t.Errorf("quiet range lacks %s: %s", k, res.body)
		}
	}

	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"no tenant", "/api/analytics/overview?from=" + url.QueryEscape(base.Format(time.RFC3339)), 400, "invalid_input"},
		{"malformed tenant", q("bad%20id", base, base.Add(time.Hour), ""), 400, "invalid_id"},
		{"unknown tenant", q("nobody", base, base.Add(time.Hour), ""), 404, "not_found"},
		{"no range", "/api/analytics/overview?tenantId=acme", 400, "invalid_input"},
		{"not RFC 3339", "/api/analytics/overview?tenantId=acme&from=yesterday&to=today", 400, "invalid_input"},
		{"to before from", q("acme", base, base.Add(-time.Hour), ""), 400, "invalid_input"},
		{"range over 31 days", q("acme", base.Add(-32*24*time.Hour), base, ""), 400, "invalid_input"},
		{"limit over 100", q("acme", base, base.Add(time.Hour), "&limit=101"), 400, "invalid_input"},
		{"limit zero", q("acme", base, base.Add(time.Hour), "&limit=0"), 400, "invalid_input"},
		{"malformed sensor", q("acme", base, base.Add(time.Hour), "&sensorId=..%2F"), 400, "invalid_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.get(tc.path).expect(t, tc.name, tc.status, tc.code)
		})
	}
	if res := w.do(request{method: "GET", path: q("acme", base, base.Add(time.Hour), "")}); res.status != http.StatusUnauthorized {
		t.Errorf("overview without a session: %d", res.status)
	}
	// 31 days exactly is allowed, with daily buckets.
	res = w.get(q("acme", base.Add(-31*24*time.Hour), base, "&sensorId=s1&limit=100"))
	if res.status != http.StatusOK || !strings.Contains(string(res.body), `"bucketSeconds":86400`) {
		t.Errorf("31 days: %d %.200s", res.status, res.body)
	}
}
