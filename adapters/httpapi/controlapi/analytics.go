package controlapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rxc-project/rxc/core/analytics"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/operators"
)

// The JSON of GET /api/analytics/overview. Lists are never null.

type overviewJSON struct {
	TenantID        string          `json:"tenantId"`
	From            time.Time       `json:"from"`
	To              time.Time       `json:"to"`
	BucketSeconds   int64           `json:"bucketSeconds"`
	Totals          totalsJSON      `json:"totals"`
	Series          []pointJSON     `json:"series"`
	TopSources      []addressJSON   `json:"topSources"`
	TopDestinations []addressJSON   `json:"topDestinations"`
	TopSignatures   []signatureJSON `json:"topSignatures"`
	CVEs            []cveJSON       `json:"cves"`
}

type totalsJSON struct {
	Events  int64 `json:"events"`
	Alerts  int64 `json:"alerts"`
	Sensors int64 `json:"sensors"`
}

type pointJSON struct {
	T      time.Time `json:"t"`
	Events int64     `json:"events"`
	Alerts int64     `json:"alerts"`
}

type addressJSON struct {
	IP    string `json:"ip"`
	Count int64  `json:"count"`
}

type signatureJSON struct {
	SignatureID int64  `json:"signatureId"`
	Signature   string `json:"signature"`
	Category    string `json:"category"`
	Severity    int    `json:"severity"`
	Count       int64  `json:"count"`
}

type cveJSON struct {
	ID       string    `json:"id"`
	Count    int64     `json:"count"`
	LastSeen time.Time `json:"lastSeen"`
}

func overviewOut(ov analytics.Overview) overviewJSON {
	out := overviewJSON{
		TenantID: ov.Query.TenantID, From: ov.Query.From.UTC(), To: ov.Query.To.UTC(),
		BucketSeconds: int64(ov.Bucket / time.Second),
		Totals:        totalsJSON{Events: ov.Totals.Events, Alerts: ov.Totals.Alerts, Sensors: ov.Totals.Sensors},
		Series:        make([]pointJSON, 0, len(ov.Series)),
		TopSources:    addressesOut(ov.TopSources), TopDestinations: addressesOut(ov.TopDestinations),
		TopSignatures: make([]signatureJSON, 0, len(ov.TopSignatures)),
		CVEs:          make([]cveJSON, 0, len(ov.CVEs)),
	}
	for _, p := range ov.Series {
		out.Series = append(out.Series, pointJSON{T: p.T.UTC(), Events: p.Events, Alerts: p.Alerts})
	}
	for _, s := range ov.TopSignatures {
		out.TopSignatures = append(out.TopSignatures, signatureJSON(s))
	}
	for _, c := range ov.CVEs {
		out.CVEs = append(out.CVEs, cveJSON{ID: c.ID, Count: c.Count, LastSeen: c.LastSeen.UTC()})
	}
	return out
}

func addressesOut(as []analytics.AddressCount) []addressJSON {
	out := make([]addressJSON, 0, len(as))
	for _, a := range as {
		out = append(out, addressJSON{IP: a.IP, Count: a.Count})
	}
	return out
}

// overview answers GET /api/analytics/overview?tenantId=&from=&to=&sensorId=&limit=.
func (a *API) overview(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	q, err := overviewQuery(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.tenantVisible(w, r, p, operators.PermView, q.TenantID) {
		return
	}
	if a.analytics == nil {
		a.fail(w, r, analytics.ErrEventsUnavailable)
		return
	}
	ov, err := a.analytics.Overview(r.Context(), q)
	reply(a, w, r, http.StatusOK, ov, err, overviewOut)
}

func overviewQuery(r *http.Request) (analytics.Query, error) {
	v := r.URL.Query()
	q := analytics.Query{TenantID: v.Get("tenantId"), SensorID: v.Get("sensorId")}
	if q.TenantID == "" {
		return q, fmt.Errorf("%w: tenantId is required", analytics.ErrInvalidInput)
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		s := v.Get(f.name)
		if s == "" {
			return q, fmt.Errorf("%w: %s is required (RFC 3339)", analytics.ErrInvalidInput, f.name)
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return q, fmt.Errorf("%w: %s is not an RFC 3339 time", analytics.ErrInvalidInput, f.name)
		}
		*f.dst = t
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, fmt.Errorf("%w: limit must be a whole number between 1 and %d", analytics.ErrInvalidInput, analytics.MaxLimit)
		}
		q.Limit = n
	}
	return q, nil
}

// tenantVisible answers 400 for a malformed id, 404 for an unknown tenant
// or one the principal does not see, 403 when it lacks perm there.
func (a *API) tenantVisible(w http.ResponseWriter, r *http.Request, p operators.Principal, perm operators.Permission, id string) bool {
	if err := ids.Validate(id); err != nil {
		a.fail(w, r, err)
		return false
	}
	if !a.allow(w, r, p, perm, id, tenantNotFound(id)) {
		return false
	}
	if _, err := a.fleet.Tenant(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return false
	}
	return true
}
