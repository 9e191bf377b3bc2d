package controlapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/postgres/fleetseed"
)

// listGoal is the goal for one page of 50 at 10,000 sensors.
const listGoal = 50 * time.Millisecond

// BenchmarkSensorListPage measures GET /api/sensors pages of 50 at
// 10,000 sensors in one tenant (and 2,000 in another), through the real
// HTTP handler, session check included, and a real PostgreSQL: first and
// random deep pages for each sort, a state filter, a search, and the
// summary. It reports p50 and p99 per case and compares p99 with the goal.
func BenchmarkSensorListPage(b *testing.B) {
	e := newEnv(b, options{})
	ctx := context.Background()
	e.createTenant("fleet")
	e.createTenant("other")
	start := time.Now()
	for _, s := range []fleetseed.Spec{{TenantID: "fleet", Count: 10_000}, {TenantID: "other", Count: 2_000, Prefix: "other-"}} {
		if _, err := fleetseed.Seed(ctx, e.pool, s); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(ctx, `ANALYZE sensors`); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("seeded 12,000 fake sensors (adapters/postgres/fleetseed) in %s\n", time.Since(start).Round(time.Millisecond))

	get := func(path string) (time.Duration, []byte) {
		t0 := time.Now()
		res := e.do(request{method: "GET", path: path, operator: true})
		d := time.Since(t0)
		if res.status != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, res.status, res.body)
		}
		return d, res.body
	}
	// cursors walks a listing once and keeps every page's cursor, for
	// random deep pages.
	cursors := func(query string) []string {
		out := []string{""}
		next := ""
		for {
			path := "/api/sensors?" + query
			if next != "" {
				path += "&cursor=" + url.QueryEscape(next)
			}
			_, body := get(path)
			var p struct{ NextCursor *string }
			if err := json.Unmarshal(body, &p); err != nil {
				b.Fatal(err)
			}
			if p.NextCursor == nil {
				return out
			}
			next = *p.NextCursor
			out = append(out, next)
		}
	}

	cases := []struct{ name, query string }{
		{"name", "tenantId=fleet&limit=50&sort=name"},
		{"-createdAt", "tenantId=fleet&limit=50&sort=-createdAt"},
		{"lastSeen", "tenantId=fleet&limit=50&sort=lastSeen"},
		{"-state", "tenantId=fleet&limit=50&sort=-state"},
		{"state=error", "tenantId=fleet&limit=50&state=error"},
		{"q=fra", "tenantId=fleet&limit=50&q=fra"},
		{"all-tenants", "limit=50&sort=name"},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			pages := cursors(c.query)
			rnd := rand.New(rand.NewPCG(1, 2))
			var lat []time.Duration
			for b.Loop() {
				path := "/api/sensors?" + c.query
				if k := pages[rnd.IntN(len(pages))]; k != "" {
					path += "&cursor=" + url.QueryEscape(k)
				}
				d, _ := get(path)
				lat = append(lat, d)
			}
			report(b, fmt.Sprintf("page of 50, %s, %d pages", c.name, len(pages)), lat)
		})
	}
	// A batch for the whole tenant: the time until the operator has the
	// 202 (batch and 9,800 commands recorded; publishing is not part of it).
	b.Run("batch-10000", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			res := e.do(request{method: "POST", path: "/api/commands", operator: true, body: `{"action":"start","filter":{"tenantId":"fleet"}}`})
			lat = append(lat, time.Since(t0))
			if res.status != http.StatusAccepted {
				b.Fatalf("batch: %d %s", res.status, res.body)
			}
		}
		slices.Sort(lat)
		fmt.Printf("POST /api/commands for a tenant of 10,000 sensors (9,800 commands recorded, 200 skipped): median %s over %d\n",
			lat[len(lat)/2].Round(time.Millisecond), len(lat))
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "median-ms")
	})
	b.Run("summary", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			d, _ := get("/api/sensors/summary?tenantId=fleet")
			lat = append(lat, d)
		}
		report(b, "summary of 10,000", lat)
	})
}

// report adds p50 and p99 (milliseconds) to the benchmark's line and
// prints them against the goal.
func report(b *testing.B, what string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	p50, p99 := p(0.50), p(0.99)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	verdict := "met"
	if p99 >= listGoal {
		verdict = "MISSED"
	}
	fmt.Printf("GET /api/sensors at 10,000 sensors, %s: p50 %.2f ms, p99 %.2f ms over %d requests (goal p99 < %d ms: %s)\n",
		what, float64(p50.Microseconds())/1000, float64(p99.Microseconds())/1000, len(lat), listGoal.Milliseconds(), verdict)
}
