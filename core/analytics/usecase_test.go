package analytics_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/adapters/memory/eventmem"
	"github.com/rxc-project/rxc/adapters/memory/memtest"
	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/analytics/analyticstest"
)

// The use-case tests of this package run the Service on the in-memory
// event store (adapters/memory/eventmem), which passes the same contract
// suite (analyticstest.Run) as the PostgreSQL store.

func seeded(t *testing.T) *eventmem.Store {
	t.Helper()
	s := memtest.Store(t, eventmem.New, eventmem.Config{})
	analyticstest.Fleet(t, s)
	return s
}

func TestOverviewCountsOneTenantsEvents(t *testing.T) {
	t.Parallel()
	svc, err := analytics.New(analytics.Config{Events: seeded(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := analyticstest.Base

	ov, err := svc.Overview(ctx, analytics.Query{TenantID: "acme", From: base, To: base.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if ov.Query.Limit != analytics.DefaultLimit || ov.Bucket != time.Minute {
		t.Errorf("query %+v, bucket %s; want the default limit and 1m buckets for an hour", ov.Query, ov.Bucket)
	}
	if diff := cmp.Diff(analytics.Totals{Events: 6, Alerts: 4, Sensors: 2}, ov.Totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if len(ov.Series) != 60 {
		t.Fatalf("%d points; want 60 (empty buckets included)", len(ov.Series))
	}
	nonEmpty := map[int]analytics.Point{}
	for i, p := range ov.Series {
		if !p.T.Equal(base.Add(time.Duration(i) * time.Minute)) {
			t.Fatalf("point %d at %s", i, p.T)
		}
		if p.Events > 0 {
			nonEmpty[i] = p
		}
	}
	wantSeries := map[int]analytics.Point{
		1: {T: base.Add(time.Minute), Events: 1, Alerts: 1}, 2: {T: base.Add(2 * time.Minute), Events: 2, Alerts: 2},
		30: {T: base.Add(30 * time.Minute), Events: 1, Alerts: 1}, 31: {T: base.Add(31 * time.Minute), Events: 1},
		59: {T: base.Add(59 * time.Minute), Events: 1},
	}
	if diff := cmp.Diff(wantSeries, nonEmpty); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	// The other tenant's five events with the same source are not counted.
	if len(ov.TopSources) == 0 || ov.TopSources[0] != (analytics.AddressCount{IP: "198.51.100.7", Count: 3}) {
		t.Errorf("top sources %+v; want 198.51.100.7 ×3 first (acme's only)", ov.TopSources)
	}

	// A range in another time zone is the same range.
	zone := time.FixedZone("UTC+2", 2*3600)
	ov2, err := svc.Overview(ctx, analytics.Query{TenantID: "acme", From: base.In(zone), To: base.Add(time.Hour).In(zone)})
	if err != nil || ov2.Totals != ov.Totals || !ov2.Query.From.Equal(base) || ov2.Query.From.Location() != time.UTC {
		t.Errorf("range given in UTC+2: %+v, %v", ov2.Query, err)
	}
	// A longer range takes coarser buckets.
	ov3, err := svc.Overview(ctx, analytics.Query{TenantID: "acme", From: base.Add(-24 * time.Hour), To: base.Add(24 * time.Hour)})
	if err != nil || ov3.Bucket != 5*time.Minute || len(ov3.Series) != 48*12 || ov3.Totals.Events != 8 {
		t.Errorf("two days: bucket %s, %d points, %d events, %v; want 5m, 576, 8", ov3.Bucket, len(ov3.Series), ov3.Totals.Events, err)
	}
	// A tenant without events sees zeros and a quiet series.
	empty, err := svc.Overview(ctx, analytics.Query{TenantID: "nobody", From: base, To: base.Add(time.Hour)})
	if err != nil || empty.Totals != (analytics.Totals{}) || len(empty.Series) != 60 || len(empty.TopSources) != 0 {
		t.Errorf("empty tenant: %+v, %v", empty.Totals, err)
	}
	// Refusals never reach the store.
	for name, q := range map[string]analytics.Query{
		"no tenant":        {From: base, To: base.Add(time.Hour)},
		"tenant pattern":   {TenantID: "acme%", From: base, To: base.Add(time.Hour)},
		"reversed range":   {TenantID: "acme", From: base.Add(time.Hour), To: base},
		"range too long":   {TenantID: "acme", From: base, To: base.Add(analytics.MaxRange + time.Hour)},
		"limit too high":   {TenantID: "acme", From: base, To: base.Add(time.Hour), Limit: analytics.MaxLimit + 1},
		"bad sensor id":    {TenantID: "acme", SensorID: "s1' OR '1'='1", From: base, To: base.Add(time.Hour)},
		"missing the from": {TenantID: "acme", To: base},
	} {
		if _, err := svc.Overview(ctx, q); !errors.Is(err, analytics.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
}

// provider is a ModelProvider that answers "ok" and keeps the prompts.
type provider struct {
	mu   sync.Mutex
	msgs [][]analytics.Message
}

func (p *provider) Ping(context.Context) error { return nil }

func (p *provider) Stream(_ context.Context, _ string, msgs []analytics.Message, onDelta func(string) error) error {
	p.mu.Lock()
	p.msgs = append(p.msgs, msgs)
	p.mu.Unlock()
	return onDelta("ok")
}

type sink struct {
	chips []analytics.Enrichment
	text  strings.Builder
}

func (s *sink) Enrichment(e analytics.Enrichment) error { s.chips = append(s.chips, e); return nil }
func (s *sink) Delta(d string) error                    { s.text.WriteString(d); return nil }

// The chat's history of an indicator is the asking tenant's alone: the
// same address in another tenant's events never shows, in the chips or in
// what the model is told.
func TestChatHistoryIsTheTenantsOwn(t *testing.T) {
	t.Parallel()
	p := &provider{}
	svc, err := analytics.New(analytics.Config{
		Events: seeded(t), ChatEnabled: true, Model: "m", Provider: p, IngestionEnabled: true, IncludePrivate: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(tenant string) *sink {
		t.Helper()
		s := &sink{}
		model, err := svc.Chat(context.Background(), analytics.ChatRequest{TenantID: tenant, Question: "What is 198.51.100.7 doing, and CVE-2021-44228?"}, s)
		if err != nil || model != "m" || s.text.String() != "ok" {
			t.Fatalf("Chat(%s) = %q, %q, %v", tenant, model, s.text.String(), err)
		}
		return s
	}
	titles := func(s *sink) map[string]string {
		out := map[string]string{}
		for _, c := range s.chips {
			if c.Kind == analytics.KindHistorical {
				out[c.Indicator] = c.Title
			}
		}
		return out
	}
	acme := titles(ask("acme"))
	other := titles(ask("other"))
	nobody := titles(ask("nobody"))
	// acme saw the address 5 times and the CVE 3 times; other 5 and 5.
	if acme["198.51.100.7"] == "" || acme["CVE-2021-44228"] == "" || acme["CVE-2021-44228"] == other["CVE-2021-44228"] {
		t.Errorf("history chips: acme %v, other %v; want each tenant's own counts", acme, other)
	}
	if len(nobody) != 0 {
		t.Errorf("a tenant without events got history chips %v (another tenant's)", nobody)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last := p.msgs[len(p.msgs)-1][0].Content
	if strings.Contains(last, "History:") {
		t.Errorf("the model was told another tenant's history for nobody:\n%s", last)
	}
}

// failingProvider answers Ping with ping and every Stream with stream.
type failingProvider struct{ ping, stream error }

func (p failingProvider) Ping(context.Context) error { return p.ping }
func (p failingProvider) Stream(context.Context, string, []analytics.Message, func(string) error) error {
	return p.stream
}

func TestChatRefusals(t *testing.T) {
	t.Parallel()
	store := seeded(t)
	ctx := context.Background()
	ok := analytics.ChatRequest{TenantID: "acme", Question: "What happened?"}

	// Switched off, or a provider that does not answer: disabled.
	for name, cfg := range map[string]analytics.Config{
		"switched off":     {Events: store, Model: "m", Provider: &provider{}},
		"no model":         {Events: store, ChatEnabled: true, Provider: &provider{}},
		"no provider":      {Events: store, ChatEnabled: true, Model: "m"},
		"provider is down": {Events: store, ChatEnabled: true, Model: "m", Provider: failingProvider{ping: errors.New("connection refused")}},
	} {
		svc, err := analytics.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Chat(ctx, ok, &sink{}); !errors.Is(err, analytics.ErrChatDisabled) {
			t.Errorf("%s: Chat = %v, want ErrChatDisabled", name, err)
		}
	}

	p := &provider{}
	svc, err := analytics.New(analytics.Config{Events: store, ChatEnabled: true, Model: "m", Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range map[string]analytics.ChatRequest{
		"no tenant":             {Question: "q"},
		"tenant pattern":        {TenantID: "ac%", Question: "q"},
		"empty question":        {TenantID: "acme", Question: "  \n"},
		"question too long":     {TenantID: "acme", Question: strings.Repeat("x", analytics.MaxQuestionChars+1)},
		"invalid UTF-8":         {TenantID: "acme", Question: "\xff\xfe"},
		"snapshot of a pattern": {TenantID: "acme", Question: "q", Snapshot: analytics.Snapshot{SensorID: "s1 OR 1=1"}},
	} {
		if _, err := svc.Chat(ctx, req, &sink{}); !errors.Is(err, analytics.ErrInvalidInput) {
			t.Errorf("%s: Chat = %v, want ErrInvalidInput", name, err)
		}
	}
	if len(p.msgs) != 0 {
		t.Errorf("refused questions reached the model %d times", len(p.msgs))
	}
	// Control: the same service answers a good question.
	if _, err := svc.Chat(ctx, ok, &sink{}); err != nil {
		t.Errorf("good question: %v", err)
	}

	// A model that fails is ErrModelUnavailable, not a generic error.
	down, _ := analytics.New(analytics.Config{Events: store, ChatEnabled: true, Model: "m", Provider: failingProvider{stream: errors.New("502 bad gateway")}})
	if _, err := down.Chat(ctx, ok, &sink{}); !errors.Is(err, analytics.ErrModelUnavailable) {
		t.Errorf("failing model: %v, want ErrModelUnavailable", err)
	}
}
