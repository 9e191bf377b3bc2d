package controlapi

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/problem"
)

// The JSON shapes of the operator routes. Optional values are pointers so
// that they are null, never missing: the console relies on every member.

type itemsResponse[T any] struct {
	Items []T `json:"items"`
}

// writeItems answers 200 with {"items": [...]} holding each of in converted
// by out; an empty list is [], never null.
func writeItems[T, J any](w http.ResponseWriter, in []T, out func(T) J) {
	items := make([]J, 0, len(in))
	for _, v := range in {
		items = append(items, out(v))
	}
	problem.WriteJSON(w, http.StatusOK, itemsResponse[J]{Items: items})
}

type tenantJSON struct {
	ID                string     `json:"id"`
	Name              string     `json:"name"`
	NATSAccountPubKey *string    `json:"natsAccountPubKey"`
	NATSStatus        string     `json:"natsStatus"`
	CreatedAt         *time.Time `json:"createdAt"`
}

func tenantOut(t fleet.Tenant) tenantJSON {
	return tenantJSON{
		ID: t.ID, Name: t.Name, NATSAccountPubKey: nullable.String(t.NATSAccountPubKey),
		NATSStatus: string(t.NATSStatus), CreatedAt: nullable.Time(t.CreatedAt),
	}
}

type issuedClaimCodeJSON struct {
	ID        string    `json:"id"`
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expiresAt"`
}

type claimCodeJSON struct {
	ID         string     `json:"id"`
	TenantID   string     `json:"tenantId"`
	SensorName *string    `json:"sensorName"`
	ExpiresAt  time.Time  `json:"expiresAt"`
	CreatedAt  time.Time  `json:"createdAt"`
	UsedAt     *time.Time `json:"usedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
	SensorID   *string    `json:"sensorId"`
}

func claimCodeOut(c fleet.ClaimCode) claimCodeJSON {
	return claimCodeJSON{
		ID: c.ID, TenantID: c.TenantID, SensorName: nullable.String(c.SensorName),
		ExpiresAt: c.ExpiresAt.UTC(), CreatedAt: c.CreatedAt.UTC(),
		UsedAt: nullable.Time(c.UsedAt), RevokedAt: nullable.Time(c.RevokedAt), SensorID: nullable.String(c.SensorID),
	}
}

type certificateJSON struct {
	Serial   string    `json:"serial"`
	NotAfter time.Time `json:"notAfter"`
}

// commandJSON is a command as the API shows it: whether it reached the
// command stream (status) and what the sensor reported (outcome).
type commandJSON struct {
	CommandID      string     `json:"commandId"`
	Action         string     `json:"action"`
	IssuedAt       time.Time  `json:"issuedAt"`
	IssuedBy       string     `json:"issuedBy"`
	ExpiresAt      time.Time  `json:"expiresAt"`
	IdempotencyKey *string    `json:"idempotencyKey"`
	Status         string     `json:"status"`
	AcceptedAt     *time.Time `json:"acceptedAt"`
	StreamSequence *uint64    `json:"streamSequence"`
	// FailedAt is set only when the command provably never reached the
	// stream; such a command is never acknowledged.
	FailedAt *time.Time `json:"failedAt"`
	// ReportedAt is when the sensor's report on the command was recorded;
	// AcknowledgedAt is the same time for a command it applied, null for
	// one it refused (outcome "refused", outcomeReason says why).
	ReportedAt     *time.Time `json:"reportedAt"`
	AcknowledgedAt *time.Time `json:"acknowledgedAt"`
	Outcome        *string    `json:"outcome"`
	OutcomeReason  *string    `json:"outcomeReason"`
	OutcomeDetail  *string    `json:"outcomeDetail"`
}

func commandOut(c fleet.Command) commandJSON {
	out := commandJSON{
		CommandID: c.ID, Action: string(c.Action), IssuedAt: c.IssuedAt.UTC(), IssuedBy: c.IssuedBy,
		ExpiresAt: c.ExpiresAt.UTC(), IdempotencyKey: nullable.String(c.IdempotencyKey), Status: string(c.Status),
		AcceptedAt: nullable.Time(c.AcceptedAt), FailedAt: nullable.Time(c.FailedAt), ReportedAt: nullable.Time(c.AcknowledgedAt),
		Outcome: nullable.String(string(c.Outcome)), OutcomeReason: nullable.String(c.OutcomeReason), OutcomeDetail: nullable.String(c.OutcomeDetail),
	}
	if c.Outcome == fleet.OutcomeApplied {
		out.AcknowledgedAt = out.ReportedAt
	}
	if c.StreamSeq != 0 {
		seq := c.StreamSeq
		out.StreamSequence = &seq
	}
	return out
}

type sensorJSON struct {
	ID          string           `json:"id"`
	TenantID    string           `json:"tenantId"`
	Name        string           `json:"name"`
	Hostname    *string          `json:"hostname"`
	State       string           `json:"state"`
	LastSeenAt  *time.Time       `json:"lastSeenAt"`
	Certificate *certificateJSON `json:"certificate"`
	LastCommand *commandJSON     `json:"lastCommand"`
	CreatedAt   *time.Time       `json:"createdAt"`
	// AgentVersion is what the sensor's agent last reported; Address is
	// where its last health check came from. Null until known.
	AgentVersion *string `json:"agentVersion"`
	Address      *string `json:"address"`
	// Labels is {} when the sensor has none.
	Labels           map[string]string `json:"labels"`
	DecommissionedAt *time.Time        `json:"decommissionedAt"`
}

func sensorOut(s fleet.Sensor) sensorJSON {
	out := sensorJSON{
		ID: s.ID, TenantID: s.TenantID, Name: s.Name, Hostname: nullable.String(s.Hostname),
		State: string(s.State), LastSeenAt: nullable.Time(s.LastSeenAt), CreatedAt: nullable.Time(s.CreatedAt),
		AgentVersion: nullable.String(s.AgentVersion), Address: nullable.String(s.Address),
		Labels: maps.Clone(s.Labels), DecommissionedAt: nullable.Time(s.DecommissionedAt),
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	if s.Certificate.Serial != "" {
		out.Certificate = &certificateJSON{Serial: s.Certificate.Serial, NotAfter: s.Certificate.NotAfter.UTC()}
	}
	if c := s.LastCommand; c != nil {
		cmd := commandOut(*c)
		out.LastCommand = &cmd
	}
	return out
}

// pathID returns the {id} path value when it is a valid id; otherwise it
// answers 400 invalid_id and returns false.
func (a *API) pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := ids.Validate(id); err != nil {
		a.fail(w, r, err)
		return "", false
	}
	return id, true
}

func (a *API) listTenants(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	ts, err := a.fleet.ListTenants(r.Context())
	replyItems(a, w, r, visible(p, ts, func(t fleet.Tenant) string { return t.ID }), err, tenantOut)
}

type createTenantRequest struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (a *API) createTenant(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	if !a.allow(w, r, p, operators.PermAdmin, "", nil) {
		return
	}
	var req createTenantRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	if err := ids.Validate(req.ID); err != nil {
		a.fail(w, r, err)
		return
	}
	setTarget(r, req.ID)
	if n := noteOf(r); n != nil {
		n.tenant = req.ID
	}
	t, created, err := a.fleet.CreateTenant(r.Context(), req.ID, req.Name)
	reply(a, w, r, statusIfCreated(created, http.StatusCreated), t, err, tenantOut)
}

func (a *API) getTenant(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.tenantFor(w, r, p, operators.PermView)
	if !ok {
		return
	}
	t, err := a.fleet.Tenant(r.Context(), id)
	reply(a, w, r, http.StatusOK, t, err, tenantOut)
}

type issueClaimCodeRequest struct {
	TTLSeconds int64  `json:"ttlSeconds"`
	SensorName string `json:"sensorName"`
}

// maxTTLSeconds keeps ttlSeconds far from overflowing a time.Duration; the
// core enforces the real bounds.
const maxTTLSeconds = 10 * 365 * 24 * 3600

func (a *API) issueClaimCode(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.tenantFor(w, r, p, operators.PermOperate)
	if !ok {
		return
	}
	var req issueClaimCodeRequest
	// The body is optional: no body means the defaults.
	if r.ContentLength != 0 {
		if !decodeBody(w, r, MaxBodyBytes, &req) {
			return
		}
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > maxTTLSeconds {
		a.fail(w, r, fmt.Errorf("%w: ttlSeconds must lie between %d and %d", fleet.ErrInvalidInput,
			int64(fleet.MinClaimCodeTTL/time.Second), int64(fleet.MaxClaimCodeTTL/time.Second)))
		return
	}
	c, code, err := a.fleet.IssueClaimCode(r.Context(), id, time.Duration(req.TTLSeconds)*time.Second, req.SensorName, p.Actor())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	setTarget(r, c.ID)
	problem.WriteJSON(w, http.StatusCreated, issuedClaimCodeJSON{ID: c.ID, Code: code, ExpiresAt: c.ExpiresAt.UTC()})
}

func (a *API) listClaimCodes(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.tenantFor(w, r, p, operators.PermView)
	if !ok {
		return
	}
	cs, err := a.fleet.ListClaimCodes(r.Context(), id)
	replyItems(a, w, r, cs, err, claimCodeOut)
}

func (a *API) revokeClaimCode(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.pathID(w, r)
	if !ok {
		return
	}
	c, err := a.fleet.ClaimCode(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.allow(w, r, p, operators.PermOperate, c.TenantID, claimCodeNotFound(id)) {
		return
	}
	a.replyNoContent(w, r, a.fleet.RevokeClaimCode(r.Context(), id))
}

func (a *API) getSensor(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	s, ok := a.sensorFor(w, r, p, operators.PermView)
	if !ok {
		return
	}
	problem.WriteJSON(w, http.StatusOK, sensorOut(s))
}

// commandRequest is the body of a sensor's command, and what a batch of
// commands (createBatchRequest) has in common with it.
type commandRequest struct {
	Action string `json:"action"`
}

func (c commandRequest) actionName() string { return c.Action }

// actionOf is the command action a request names: start or stop.
func actionOf(s string) (fleet.Action, error) {
	if a := fleet.Action(s); a.Valid() {
		return a, nil
	}
	return "", fmt.Errorf("%w: action %q (want start or stop)", fleet.ErrInvalidInput, s)
}

// decodeCommand reads a command's or a batch's body (at most limit bytes)
// into req and returns the action it names; on failure it has answered.
func (a *API) decodeCommand(w http.ResponseWriter, r *http.Request, limit int64, req interface{ actionName() string }) (fleet.Action, bool) {
	if !decodeBody(w, r, limit, req) {
		return "", false
	}
	action, err := actionOf(req.actionName())
	if err != nil {
		a.fail(w, r, err)
		return "", false
	}
	return action, true
}

// messagingOn refuses a command while messaging is off, before anything
// is recorded: no command could ever leave.
func (a *API) messagingOn(w http.ResponseWriter, r *http.Request) bool {
	if !a.messaging {
		a.fail(w, r, fleet.ErrMessagingDisabled)
		return false
	}
	return true
}

// IdempotencyKeyHeader names the header that makes command creation
// idempotent: a repeat with the same key (per sensor) returns the first
// command and never publishes a second one.
const IdempotencyKeyHeader = "Idempotency-Key"

func (a *API) issueCommand(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	sensor, ok := a.sensorFor(w, r, p, operators.PermOperate)
	if !ok {
		return
	}
	id := sensor.ID
	var req commandRequest
	action, ok := a.decodeCommand(w, r, MaxBodyBytes, &req)
	if !ok || !a.messagingOn(w, r) {
		return
	}
	c, created, err := a.fleet.IssueCommand(r.Context(), id, action, p.Actor(), r.Header.Get(IdempotencyKeyHeader))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/sensors/"+id+"/commands/"+c.ID)
	// A repeat of an earlier request (not created) did nothing new: 200.
	problem.WriteJSON(w, statusIfCreated(created, http.StatusAccepted), commandOut(c))
}

// commandPage is one page of a sensor's command history; nextCursor is
// absent on the last page.
type commandPage struct {
	Items      []commandJSON `json:"items"`
	NextCursor *string       `json:"nextCursor"`
}

// Bounds of GET /api/sensors/{id}/commands.
const (
	defaultCommandPage = 50
)

func (a *API) listCommands(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	sensor, ok := a.sensorFor(w, r, p, operators.PermView)
	if !ok {
		return
	}
	id := sensor.ID
	q := r.URL.Query()
	limit := defaultCommandPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > fleet.MaxCommandPage {
			a.fail(w, r, fmt.Errorf("%w: limit must be 1–%d", fleet.ErrInvalidInput, fleet.MaxCommandPage))
			return
		}
		limit = n
	}
	var after fleet.CommandCursor
	if v := q.Get("cursor"); v != "" {
		c, err := decodeCursor(v)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		after = c
	}
	cmds, err := a.fleet.SensorCommands(r.Context(), id, after, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page := commandPage{Items: make([]commandJSON, 0, len(cmds))}
	for _, c := range cmds {
		page.Items = append(page.Items, commandOut(c))
	}
	if len(cmds) == limit {
		last := cmds[len(cmds)-1]
		next := encodeCursor(fleet.CommandCursor{IssuedAt: last.IssuedAt, ID: last.ID})
		page.NextCursor = &next
	}
	problem.WriteJSON(w, http.StatusOK, page)
}

// encodeCursor makes an opaque page cursor: the last item's issue time and
// id, base64url.
func encodeCursor(c fleet.CommandCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.IssuedAt.UTC().Format(time.RFC3339Nano) + " " + c.ID))
}

func decodeCursor(v string) (fleet.CommandCursor, error) {
	bad := fmt.Errorf("%w: cursor is not one this API returned", fleet.ErrInvalidInput)
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) > 256 {
		return fleet.CommandCursor{}, bad
	}
	ts, id, ok := strings.Cut(string(raw), " ")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if !ok || err != nil || ids.Validate(id) != nil {
		return fleet.CommandCursor{}, bad
	}
	return fleet.CommandCursor{IssuedAt: t, ID: id}, nil
}

func (a *API) revokeSensor(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	sensor, ok := a.sensorFor(w, r, p, operators.PermOperate)
	if !ok {
		return
	}
	if err := a.fleet.RevokeSensor(r.Context(), sensor.ID, p.Actor()); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.fleet.Sensor(r.Context(), sensor.ID)
	reply(a, w, r, http.StatusOK, s, err, sensorOut)
}

type chatStatusJSON struct {
	Enabled      bool               `json:"enabled"`
	Model        string             `json:"model"`
	Capabilities chatCapabilityJSON `json:"capabilities"`
}

type chatCapabilityJSON struct {
	ThreatIntel          bool `json:"threatIntel"`
	HistoricalEnrichment bool `json:"historicalEnrichment"`
	Playbooks            bool `json:"playbooks"`
}

// tenantFor reads the {id} tenant and checks perm on it: a tenant the
// principal does not see is not found (whether it exists is the route's
// to ask).
func (a *API) tenantFor(w http.ResponseWriter, r *http.Request, p operators.Principal, perm operators.Permission) (string, bool) {
	id, ok := a.pathID(w, r)
	if !ok || !a.allow(w, r, p, perm, id, tenantNotFound(id)) {
		return "", false
	}
	return id, true
}

// sensorFor resolves the {id} sensor and checks perm on its tenant: a
// sensor of a tenant the principal does not see is not found.
func (a *API) sensorFor(w http.ResponseWriter, r *http.Request, p operators.Principal, perm operators.Permission) (fleet.Sensor, bool) {
	id, ok := a.pathID(w, r)
	if !ok {
		return fleet.Sensor{}, false
	}
	s, err := a.fleet.Sensor(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return fleet.Sensor{}, false
	}
	if !a.allow(w, r, p, perm, s.TenantID, sensorNotFound(id)) {
		return fleet.Sensor{}, false
	}
	return s, true
}

// visible keeps the items of tenants the principal sees.
func visible[T any](p operators.Principal, items []T, tenant func(T) string) []T {
	out := items[:0:0]
	for _, it := range items {
		if p.Sees(tenant(it)) {
			out = append(out, it)
		}
	}
	return out
}

// Not-found errors for objects the principal may not see: the same answer
// as for objects that do not exist.
func tenantNotFound(id string) error { return fmt.Errorf("tenant %s: %w", id, fleet.ErrNotFound) }
func sensorNotFound(id string) error { return fmt.Errorf("sensor %s: %w", id, fleet.ErrNotFound) }
func claimCodeNotFound(id string) error {
	return fmt.Errorf("claim code %s: %w", id, fleet.ErrNotFound)
}
