package controlapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rxc-project/rxc/adapters/nullable"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/problem"
)

type operatorJSON struct {
	ID         string     `json:"id"`
	Email      string     `json:"email"`
	Role       string     `json:"role"`
	Tenants    []string   `json:"tenants"`
	Disabled   bool       `json:"disabled"`
	DisabledAt *time.Time `json:"disabledAt"`
	CreatedAt  time.Time  `json:"createdAt"`
	// SecondFactor: TOTP is enabled.
	SecondFactor bool `json:"secondFactor"`
}

func operatorOut(o operators.Operator) operatorJSON {
	return operatorJSON{ID: o.ID, Email: o.Email, Role: string(o.Role), Tenants: nonNil(o.Tenants),
		Disabled: !o.Enabled(), DisabledAt: nullable.Time(o.DisabledAt), CreatedAt: o.CreatedAt.UTC(), SecondFactor: o.SecondFactor}
}

func (a *API) listOperators(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	os, err := a.operators.ListOperators(r.Context(), p)
	replyItems(a, w, r, os, err, operatorOut)
}

type createOperatorRequest struct {
	Email    string   `json:"email"`
	Password string   `json:"password"`
	Role     string   `json:"role"`
	Tenants  []string `json:"tenants"`
}

func (a *API) createOperator(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	var req createOperatorRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	o, err := a.operators.AddOperator(r.Context(), p, operators.NewOperator{Email: req.Email, Password: req.Password, Role: operators.Role(req.Role), Tenants: req.Tenants})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	setTarget(r, o.ID)
	problem.WriteJSON(w, http.StatusCreated, operatorOut(o))
}

func (a *API) getOperator(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.pathID(w, r)
	if !ok {
		return
	}
	o, err := a.operators.Operator(r.Context(), p, id)
	reply(a, w, r, http.StatusOK, o, err, operatorOut)
}

type updateOperatorRequest struct {
	Role     *string   `json:"role"`
	Tenants  *[]string `json:"tenants"`
	Disabled *bool     `json:"disabled"`
}

func (a *API) updateOperator(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.pathID(w, r)
	if !ok {
		return
	}
	var req updateOperatorRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	u := operators.Update{Tenants: req.Tenants, Disabled: req.Disabled}
	if req.Role != nil {
		role := operators.Role(*req.Role)
		u.Role = &role
	}
	o, err := a.operators.UpdateOperator(r.Context(), p, id, u)
	reply(a, w, r, http.StatusOK, o, err, operatorOut)
}

type passwordRequest struct {
	// CurrentPassword is required when operators change their own.
	CurrentPassword string `json:"currentPassword"`
	Password        string `json:"password"`
}

func (a *API) resetPassword(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.pathID(w, r)
	if !ok {
		return
	}
	var req passwordRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	a.replyNoContent(w, r, a.operators.ResetPassword(r.Context(), p, id, req.CurrentPassword, req.Password))
}

type signOutResponse struct {
	Sessions int `json:"sessions"`
}

func (a *API) signOutEverywhere(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.pathID(w, r)
	if !ok {
		return
	}
	n, err := a.operators.SignOutEverywhere(r.Context(), p, id)
	reply(a, w, r, http.StatusOK, n, err, func(n int) signOutResponse { return signOutResponse{Sessions: n} })
}

type tokenJSON struct {
	ID         string     `json:"id"`
	OperatorID string     `json:"operatorId"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Tenants    []string   `json:"tenants"`
	CreatedBy  string     `json:"createdBy"`
	CreatedAt  time.Time  `json:"createdAt"`
	ExpiresAt  time.Time  `json:"expiresAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
}

func tokenOut(t operators.APIToken) tokenJSON {
	return tokenJSON{ID: t.ID, OperatorID: t.OperatorID, Name: t.Name, Role: string(t.Role), Tenants: nonNil(t.Tenants),
		CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt.UTC(), ExpiresAt: t.ExpiresAt.UTC(), RevokedAt: nullable.Time(t.RevokedAt)}
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	owner := p.Operator.ID
	if q := r.URL.Query(); q.Has("operatorId") {
		owner = q.Get("operatorId")
	}
	ts, err := a.operators.ListAPITokens(r.Context(), p, owner)
	replyItems(a, w, r, ts, err, tokenOut)
}

type createTokenRequest struct {
	OperatorID string   `json:"operatorId"`
	Name       string   `json:"name"`
	Role       string   `json:"role"`
	Tenants    []string `json:"tenants"`
	TTLSeconds int64    `json:"ttlSeconds"`
}

type createdTokenJSON struct {
	tokenJSON
	Token string `json:"token"`
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	var req createTokenRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > int64(operators.MaxTokenTTL/time.Second) {
		a.fail(w, r, fmt.Errorf("%w: ttlSeconds must lie between %d and %d", operators.ErrInvalidInput,
			int64(operators.MinTokenTTL/time.Second), int64(operators.MaxTokenTTL/time.Second)))
		return
	}
	t, token, err := a.operators.CreateAPIToken(r.Context(), p, operators.NewAPIToken{
		OperatorID: req.OperatorID, Name: req.Name, Role: operators.Role(req.Role), Tenants: req.Tenants,
		TTL: time.Duration(req.TTLSeconds) * time.Second,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	setTarget(r, t.ID)
	problem.WriteJSON(w, http.StatusCreated, createdTokenJSON{tokenJSON: tokenOut(t), Token: token})
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	id, ok := a.pathID(w, r)
	if !ok {
		return
	}
	t, err := a.operators.RevokeAPIToken(r.Context(), p, id)
	reply(a, w, r, http.StatusOK, t, err, tokenOut)
}

type auditJSON struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	ActorID   string    `json:"actorId"`
	Actor     string    `json:"actor"`
	ActorRole string    `json:"actorRole"`
	TokenID   string    `json:"tokenId"`
	Source    string    `json:"source"`
	Action    string    `json:"action"`
	TenantID  string    `json:"tenantId"`
	Target    string    `json:"target"`
	Outcome   string    `json:"outcome"`
	Status    int       `json:"status"`
	Detail    string    `json:"detail"`
}

type auditPage struct {
	Items      []auditJSON `json:"items"`
	NextCursor string      `json:"nextCursor"`
}

// listAudit answers GET /api/audit: admins see every record, others the
// records of their tenants (a tenant they do not see is not found).
func (a *API) listAudit(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	if a.audit == nil {
		a.fail(w, r, fmt.Errorf("%w: no audit trail on this control plane", operators.ErrNotFound))
		return
	}
	q := r.URL.Query()
	f := audit.Filter{TenantID: q.Get("tenantId"), Actor: q.Get("actor"), Action: q.Get("action")}
	if f.TenantID != "" {
		if err := ids.Validate(f.TenantID); err != nil {
			a.fail(w, r, err)
			return
		}
		if !a.allow(w, r, p, operators.PermView, f.TenantID, tenantNotFound(f.TenantID)) {
			return
		}
	}
	if p.Role != operators.RoleAdmin {
		f.Tenants = nonNil(p.Tenants)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			a.fail(w, r, fmt.Errorf("%w: limit must be a whole number", audit.ErrInvalidInput))
			return
		}
		f.Limit = n
	}
	es, next, err := a.audit.List(r.Context(), f, q.Get("cursor"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := auditPage{Items: make([]auditJSON, 0, len(es)), NextCursor: next}
	for _, e := range es {
		out.Items = append(out.Items, auditJSON{ID: e.ID, At: e.At, ActorID: e.ActorID, Actor: e.Actor, ActorRole: e.ActorRole,
			TokenID: e.TokenID, Source: e.Source, Action: e.Action, TenantID: e.TenantID, Target: e.Target,
			Outcome: e.Outcome, Status: e.Status, Detail: e.Detail})
	}
	problem.WriteJSON(w, http.StatusOK, out)
}
