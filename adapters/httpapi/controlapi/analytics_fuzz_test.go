package controlapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/rxc-project/rxc/core/analytics"
)

// FuzzOverviewQuery: any query string is either refused as invalid input
// or gives a query the store may run (valid ids, bounded range and limit).
func FuzzOverviewQuery(f *testing.F) {
	f.Add("tenantId=acme&from=2026-11-20T10:00:00Z&to=2026-11-20T11:00:00Z&limit=10")
	f.Add("tenantId=acme&from=2026-11-20T10:00:00%2B02:00&to=2026-12-20T11:00:00Z&sensorId=s1&limit=100")
	f.Add("tenantId=&from=&to=&limit=-1")
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/api/analytics/overview", nil)
		r.URL.RawQuery = raw
		q, err := overviewQuery(r)
		if err != nil {
			return
		}
		if err := q.Validate(); err != nil {
			return
		}
		if q.Limit < 1 || q.Limit > analytics.MaxLimit || q.To.Sub(q.From) > analytics.MaxRange || !q.To.After(q.From) {
			t.Fatalf("accepted %+v", q)
		}
	})
}

// FuzzDecodeSnapshot: any snapshot is refused with a problem or decoded
// within the size limit, never panics.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(`{"from":"2026-11-20T10:00:00Z","to":"2026-11-20T11:00:00Z","topSources":[{"ip":"45.33.32.156","count":3}],"text":"x"}`)
	f.Add(`{"cves":[{"id":"CVE-2021-44228","count":1,"lastSeen":"2026-11-20T10:00:00Z"}],"topSignatures":[{"signatureId":1,"signature":"s","category":"c","severity":2,"count":1}]}`)
	f.Add(`null`)
	f.Add(`{"view":"/sensors"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return // the request body decoder refuses these before
		}
		_, p := decodeSnapshot(json.RawMessage(raw))
		if p != nil {
			if p.Code == "" || p.Status < 400 {
				t.Fatalf("problem without code or status: %+v", p)
			}
			return
		}
		if len(raw) > analytics.MaxSnapshotBytes {
			t.Fatalf("accepted %d bytes", len(raw))
		}
	})
}
