package controlapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/problem"
)

// MaxBatchBodyBytes is the largest POST /api/commands body (1 MiB): room
// for fleet.MaxBatchSensorIDs ids of the longest kind.
const MaxBatchBodyBytes = 1 << 20

// page is one page of a paged listing (GET /api/sensors, GET
// /api/commands/batches); nextCursor is null on the last page.
type page[J any] struct {
	Items      []J     `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

// writePage answers a paged listing in the caller's scope (scopeOf, for
// ?tenantId) with the ?limit it asks (pageLimit; at most max): list reads
// one page for those tenants, render turns each item into its JSON.
func writePage[T, J any](a *API, w http.ResponseWriter, r *http.Request, p operators.Principal, max int, list func(tenants []string, limit int) ([]T, string, error), render func(T) J) {
	q := r.URL.Query()
	limit, err := pageLimit(q, max)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	scope, ok := a.scopeOf(w, r, p, q.Get("tenantId"), operators.PermView)
	if !ok {
		return
	}
	items, next, err := list(scope, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := page[J]{Items: make([]J, 0, len(items)), NextCursor: nullable.String(next)}
	for _, it := range items {
		out.Items = append(out.Items, render(it))
	}
	problem.WriteJSON(w, http.StatusOK, out)
}

// scopeOf is the tenants a request may read (perm PermView) or command
// (PermOperate): the tenantId it names, when the principal sees it (else
// 404, as for a tenant that does not exist); else every tenant for an
// admin (nil) and the granted ones for everybody else (never nil).
func (a *API) scopeOf(w http.ResponseWriter, r *http.Request, p operators.Principal, tenantID string, perm operators.Permission) ([]string, bool) {
	if tenantID != "" {
		if err := ids.Validate(tenantID); err != nil {
			a.fail(w, r, err)
			return nil, false
		}
		if !a.allow(w, r, p, perm, tenantID, tenantNotFound(tenantID)) {
			return nil, false
		}
		return []string{tenantID}, true
	}
	if p.Role == operators.RoleAdmin {
		return nil, true
	}
	return append([]string{}, p.Tenants...), true
}

func (a *API) listSensors(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	q := r.URL.Query()
	l := fleet.SensorListing{
		SensorMatch: fleet.SensorMatch{State: fleet.State(q.Get("state")), Q: q.Get("q")},
		Sort:        fleet.SensorSort(q.Get("sort")),
		Cursor:      q.Get("cursor"),
	}
	var err error
	if l.Labels, err = labelSelectors(q); err != nil {
		a.fail(w, r, err)
		return
	}
	if l.IncludeDecommissioned, err = includeDecommissioned(q); err != nil {
		a.fail(w, r, err)
		return
	}
	writePage(a, w, r, p, fleet.MaxSensorPage, func(tenants []string, limit int) ([]fleet.Sensor, string, error) {
		l.Tenants, l.Limit = tenants, limit
		pg, err := a.fleet.ListSensors(r.Context(), l)
		return pg.Items, pg.NextCursor, err
	}, sensorOut)
}

type sensorSummaryJSON struct {
	Total   int            `json:"total"`
	ByState map[string]int `json:"byState"`
}

func (a *API) sensorSummary(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	scope, ok := a.scopeOf(w, r, p, r.URL.Query().Get("tenantId"), operators.PermView)
	if !ok {
		return
	}
	total, byState, err := a.fleet.SensorSummary(r.Context(), scope)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := sensorSummaryJSON{Total: total, ByState: make(map[string]int, len(byState))}
	for st, n := range byState {
		out.ByState[string(st)] = n
	}
	problem.WriteJSON(w, http.StatusOK, out)
}

type batchFilterJSON struct {
	TenantID string `json:"tenantId"`
	State    string `json:"state"`
	Q        string `json:"q"`
	// Labels the sensors must all carry (as GET /api/sensors?label=).
	Labels map[string]string `json:"labels"`
}

type createBatchRequest struct {
	commandRequest
	SensorIDs []string         `json:"sensorIds"`
	Filter    *batchFilterJSON `json:"filter"`
}

// batchJSON is a batch as the API shows it. pending, accepted, failed and
// expired add up to total (each command's status); acknowledged (applied)
// and refused count the sensors' reports. Skipped sensors got no command.
type batchJSON struct {
	BatchID            string    `json:"batchId"`
	Action             string    `json:"action"`
	CreatedAt          time.Time `json:"createdAt"`
	CreatedBy          string    `json:"createdBy"`
	TenantIDs          []string  `json:"tenantIds"`
	Matched            int       `json:"matched"`
	Total              int       `json:"total"`
	SkippedRevoked     int       `json:"skippedRevoked"`
	SkippedNotEnrolled int       `json:"skippedNotEnrolled"`
	Pending            int       `json:"pending"`
	Accepted           int       `json:"accepted"`
	Acknowledged       int       `json:"acknowledged"`
	Refused            int       `json:"refused"`
	Failed             int       `json:"failed"`
	Expired            int       `json:"expired"`
	// Done: no command is pending any more.
	Done bool `json:"done"`
}

func batchOut(b fleet.Batch) batchJSON {
	c := b.Counts
	return batchJSON{
		BatchID: b.ID, Action: string(b.Action), CreatedAt: b.CreatedAt.UTC(), CreatedBy: b.CreatedBy,
		TenantIDs: append([]string{}, b.TenantIDs...), Matched: b.Matched, Total: b.Total,
		SkippedRevoked: b.SkippedRevoked, SkippedNotEnrolled: b.SkippedNotEnrolled,
		Pending: c.Pending, Accepted: c.Accepted, Acknowledged: c.Acknowledged, Refused: c.Refused,
		Failed: c.Failed, Expired: c.Expired, Done: c.Pending == 0,
	}
}

// createBatch answers 202 once the batch and its commands are recorded;
// they are published in the background. A repeat with the same
// Idempotency-Key answers 200 with the same batch.
func (a *API) createBatch(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	// Only the roles that may command a sensor may command many; refused
	// before anything is looked up, so nothing about the targets leaks.
	if p.Role != operators.RoleAdmin && p.Role != operators.RoleOperator {
		a.fail(w, r, operators.ErrForbidden)
		return
	}
	var req createBatchRequest
	action, ok := a.decodeCommand(w, r, MaxBatchBodyBytes, &req)
	if !ok {
		return
	}
	if (req.Filter == nil) == (req.SensorIDs == nil) {
		a.fail(w, r, fmt.Errorf("%w: give exactly one of sensorIds and filter", fleet.ErrInvalidInput))
		return
	}
	br := fleet.BatchRequest{
		Action: action, SensorIDs: req.SensorIDs, IssuedBy: p.Actor(), OperatorID: p.Operator.ID,
		IdempotencyKey: r.Header.Get(IdempotencyKeyHeader),
	}
	scope, ok := a.scopeOf(w, r, p, "", operators.PermOperate)
	if !ok {
		return
	}
	br.Scope = scope
	if f := req.Filter; f != nil {
		m := fleet.SensorMatch{State: fleet.State(f.State), Q: f.Q, Labels: f.Labels}
		if f.TenantID != "" {
			if m.Tenants, ok = a.scopeOf(w, r, p, f.TenantID, operators.PermOperate); !ok {
				return
			}
		}
		br.Filter = &m
	}
	if !a.messagingOn(w, r) {
		return
	}
	if dry := r.URL.Query().Get("dryRun"); dry != "" {
		if dry != "true" {
			a.fail(w, r, fmt.Errorf("%w: dryRun is true or absent", fleet.ErrInvalidInput))
			return
		}
		pv, err := a.fleet.PreviewBatch(r.Context(), br)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		problem.WriteJSON(w, http.StatusOK, batchPreviewJSON{
			Matched: pv.Matched, Total: pv.Total, SkippedRevoked: pv.SkippedRevoked, SkippedNotEnrolled: pv.SkippedNotEnrolled,
		})
		return
	}
	b, created, err := a.fleet.CreateBatch(r.Context(), br)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	setTarget(r, b.ID)
	if n := noteOf(r); n != nil && len(b.TenantIDs) == 1 {
		n.tenant = b.TenantIDs[0]
	}
	w.Header().Set("Location", "/api/commands/batches/"+b.ID)
	problem.WriteJSON(w, statusIfCreated(created, http.StatusAccepted), batchOut(b))
}

// batchPreviewJSON answers POST /api/commands?dryRun=true: what the batch
// would send now, and why the rest would get nothing.
type batchPreviewJSON struct {
	Matched            int `json:"matched"`
	Total              int `json:"total"`
	SkippedRevoked     int `json:"skippedRevoked"`
	SkippedNotEnrolled int `json:"skippedNotEnrolled"`
}

// listBatches lists the batches the caller may read, newest first: those
// whose every tenant is in scope, and their own that touched none.
func (a *API) listBatches(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	l := fleet.BatchListing{OperatorID: p.Operator.ID, Cursor: r.URL.Query().Get("cursor")}
	writePage(a, w, r, p, fleet.MaxBatchPage, func(tenants []string, limit int) ([]fleet.Batch, string, error) {
		l.Tenants, l.Limit = tenants, limit
		pg, err := a.fleet.ListBatches(r.Context(), l)
		return pg.Items, pg.NextCursor, err
	}, batchOut)
}

func (a *API) getBatch(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id := r.PathValue("id")
	notFound := fmt.Errorf("batch %s: %w", id, fleet.ErrNotFound)
	b, err := a.fleet.Batch(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !batchVisible(p, b) {
		a.fail(w, r, notFound)
		return
	}
	problem.WriteJSON(w, http.StatusOK, batchOut(b))
}

// batchVisible: admins see every batch; others one whose every tenant
// they see, or (one that touched no tenant) their own.
func batchVisible(p operators.Principal, b fleet.Batch) bool {
	if p.Role == operators.RoleAdmin {
		return true
	}
	if len(b.TenantIDs) == 0 {
		return b.OperatorID == p.Operator.ID
	}
	return !slices.ContainsFunc(b.TenantIDs, func(t string) bool { return !p.Sees(t) })
}

// pageLimit reads a list route's limit (0 when absent: the use case's default); a value that is
// not a positive whole number is fleet.ErrInvalidLimit, and the use case refuses one above max.
func pageLimit(q url.Values, max int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: limit must be a whole number between 1 and %d", fleet.ErrInvalidLimit, max)
	}
	return n, nil
}
