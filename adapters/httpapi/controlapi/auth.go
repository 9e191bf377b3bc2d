package controlapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/sensorapi"
	"github.com/rxc-project/rxc/adapters/httpapi/statusrec"
	"github.com/rxc-project/rxc/core/audit"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/problem"
)

// operatorHandler is a route that needs an authenticated principal.
type operatorHandler func(w http.ResponseWriter, r *http.Request, p operators.Principal)

// operator authenticates the request — an API token in
// "Authorization: Bearer rxc_…", else the session cookie (whose
// state-changing requests must come from an allowed origin) — and passes
// the principal on.
func (a *API) operator(next operatorHandler) http.HandlerFunc {
	withPrincipal := func(w http.ResponseWriter, r *http.Request) {
		p, err := a.authenticate(r)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if n := noteOf(r); n != nil {
			n.principal = &p
		}
		if p.EnrolmentOnly && !enrolmentRoutes[r.URL.Path] {
			a.fail(w, r, operators.ErrEnrolmentRequired)
			return
		}
		next(w, r, p)
	}
	cookie := a.sameOrigin(withPrincipal)
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := apiToken(r); ok {
			// A bearer token is never sent by a browser on its own, so
			// the origin check that guards cookies does not apply.
			withPrincipal(w, r)
			return
		}
		cookie(w, r)
	}
}

// enrolmentRoutes are what a session that must enrol a second factor first
// may call (with GET /api/auth/me to learn that it must).
var enrolmentRoutes = map[string]bool{"/api/auth/me": true, "/api/auth/me/totp": true, "/api/auth/me/totp/confirm": true}

// apiToken returns the API token of an "Authorization: Bearer rxc_…" header.
func apiToken(r *http.Request) (string, bool) {
	tok, ok := sensorapi.Bearer(r)
	if !ok || !strings.HasPrefix(tok, operators.TokenPrefix) {
		return "", false
	}
	return tok, true
}

func (a *API) authenticate(r *http.Request) (operators.Principal, error) {
	if tok, ok := apiToken(r); ok {
		return a.operators.AuthenticateToken(r.Context(), tok)
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return operators.Principal{}, operators.ErrUnauthenticated
	}
	return a.operators.Authenticate(r.Context(), c.Value)
}

// allow is the one check of a principal's permission on a tenant. A tenant
// the principal does not see answers as notFound (no existence leak); a
// visible one without the permission answers 403 forbidden. It records the
// tenant for the audit trail and returns whether the handler may go on.
func (a *API) allow(w http.ResponseWriter, r *http.Request, p operators.Principal, perm operators.Permission, tenantID string, notFound error) bool {
	if n := noteOf(r); n != nil && tenantID != "" {
		n.tenant = tenantID
	}
	switch {
	case perm != operators.PermAdmin && !p.Sees(tenantID):
		a.fail(w, r, notFound)
		return false
	case !p.Can(perm, tenantID):
		a.fail(w, r, operators.ErrForbidden)
		return false
	}
	return true
}

// auditNote carries what the audit trail needs from a request's handler.
type auditNote struct {
	principal *operators.Principal
	tenant    string
	target    string
	actor     string // the e-mail tried at a login
	detail    string // the problem code answered, if any
}

type noteKey struct{}

func noteOf(r *http.Request) *auditNote {
	n, _ := r.Context().Value(noteKey{}).(*auditNote)
	return n
}

// setTarget names the object a request acts on, for the audit trail.
func setTarget(r *http.Request, target string) {
	if n := noteOf(r); n != nil {
		n.target = target
	}
}

// audited records the request in the audit trail under action once the
// handler answered: who (principal or the e-mail tried at login), from
// where, on which tenant and object, and how it ended. Requests nobody
// authenticated for are not recorded, except logins.
func (a *API) audited(action string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := &auditNote{target: r.PathValue("id")}
		r = r.WithContext(context.WithValue(r.Context(), noteKey{}, n))
		rec, ok := w.(*statusrec.Recorder)
		if !ok {
			rec = &statusrec.Recorder{ResponseWriter: w}
		}
		h(rec, r)
		if a.audit == nil || (n.principal == nil && n.actor == "") {
			return
		}
		status := rec.Code()
		e := audit.Entry{
			Action: action, Source: clientKey(r, a.trustProxy), TenantID: n.tenant, Target: n.target,
			Status: status, Outcome: outcomeOf(status), Detail: n.detail,
		}
		if p := n.principal; p != nil {
			e.ActorID, e.Actor, e.ActorRole, e.TokenID = p.Operator.ID, p.Operator.Email, string(p.Role), p.TokenID
		} else {
			e.Actor = n.actor
		}
		record, summaries := a.auditGuard.admit(e)
		if !record {
			return
		}
		// The answer is out; the record must not depend on the caller
		// staying connected.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		for _, s := range summaries {
			_ = a.audit.Record(ctx, s)
		}
		_ = a.audit.Record(ctx, e)
	}
}

func outcomeOf(status int) string {
	switch {
	case status < 400:
		return audit.OutcomeSuccess
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound || status == http.StatusTooManyRequests:
		return audit.OutcomeDenied
	default:
		return audit.OutcomeFailure
	}
}

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	// TOTP or RecoveryCode: the second factor of an account that has one.
	TOTP         string `json:"totp"`
	RecoveryCode string `json:"recoveryCode"`
}

func (a *API) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	if n := noteOf(r); n != nil {
		n.actor = auditEmail(req.Email)
	}
	o, token, expires, err := a.operators.LoginWith(r.Context(), operators.Credentials{
		Email: req.Email, Password: req.Password, TOTP: req.TOTP, RecoveryCode: req.RecoveryCode,
		Address: clientKey(r, a.trustProxy),
	})
	if err != nil {
		if errors.Is(err, operators.ErrInvalidCredentials) || errors.Is(err, operators.ErrInvalidSecondFactor) || errors.As(err, new(*operators.ThrottledError)) {
			a.loginFailures.Add(1)
			a.log.Warn("login failed", "email", auditEmail(req.Email), "source", clientKey(r, a.trustProxy), logkey.Error, err.Error())
		}
		a.fail(w, r, err)
		return
	}
	if n := noteOf(r); n != nil {
		p := o.Principal()
		n.principal = &p
	}
	maxAge := int(expires.Sub(a.clock()) / time.Second)
	if maxAge < 1 {
		maxAge = 1
	}
	http.SetCookie(w, a.sessionCookie(token, maxAge))
	w.WriteHeader(http.StatusNoContent)
}

// auditEmail is the e-mail a login tried, normalised when it has the shape
// of one and cut short otherwise (it is attacker input).
func auditEmail(email string) string {
	if e, err := operators.NormalizeEmail(email); err == nil {
		return e
	}
	const most = 64
	out := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, email)
	if len(out) > most {
		out = out[:most]
	}
	return out
}

func (a *API) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
		if p, err := a.operators.Authenticate(r.Context(), c.Value); err == nil {
			if n := noteOf(r); n != nil {
				n.principal = &p
			}
		}
		if err := a.operators.Logout(r.Context(), c.Value); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	http.SetCookie(w, a.sessionCookie("", -1))
	w.WriteHeader(http.StatusNoContent)
}

// sessionCookie builds the session cookie; maxAge < 0 deletes it.
func (a *API) sessionCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: !a.localMode, SameSite: http.SameSiteLaxMode,
	}
}

type meResponse struct {
	ID      string   `json:"id"`
	Email   string   `json:"email"`
	Role    string   `json:"role"`
	Tenants []string `json:"tenants"`
	TokenID string   `json:"tokenId,omitempty"`
	// SecondFactor: TOTP is enabled for the account.
	SecondFactor bool `json:"secondFactor"`
	// SecondFactorRequired: the session may do nothing but enrol one.
	SecondFactorRequired bool `json:"secondFactorRequired"`
}

func (a *API) me(w http.ResponseWriter, _ *http.Request, p operators.Principal) {
	problem.WriteJSON(w, http.StatusOK, meResponse{
		ID: p.Operator.ID, Email: p.Operator.Email, Role: string(p.Role), Tenants: nonNil(p.Tenants), TokenID: p.TokenID,
		SecondFactor: p.Operator.SecondFactor, SecondFactorRequired: p.EnrolmentOnly,
	})
}

type totpEnrolmentResponse struct {
	Secret     string `json:"secret"`
	OTPAuthURL string `json:"otpauthUrl"`
}

// beginTOTP answers a new TOTP secret for one's own account, once.
func (a *API) beginTOTP(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	setTarget(r, p.Operator.ID)
	en, err := a.operators.BeginTOTP(r.Context(), p)
	reply(a, w, r, http.StatusCreated, en, err, func(en operators.TOTPEnrolment) totpEnrolmentResponse {
		return totpEnrolmentResponse{Secret: en.Secret, OTPAuthURL: en.OTPAuthURL}
	})
}

type totpConfirmRequest struct {
	Code string `json:"code"`
	// CurrentCode, a code of the factor that is on, is needed to replace it.
	CurrentCode string `json:"currentCode"`
}

type recoveryCodesResponse struct {
	RecoveryCodes []string `json:"recoveryCodes"`
}

// confirmTOTP enables the pending TOTP secret with one of its codes and
// answers the recovery codes, once.
func (a *API) confirmTOTP(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	setTarget(r, p.Operator.ID)
	var req totpConfirmRequest
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	codes, err := a.operators.ConfirmTOTP(r.Context(), p, req.Code, req.CurrentCode)
	reply(a, w, r, http.StatusOK, codes, err, func(c []string) recoveryCodesResponse { return recoveryCodesResponse{RecoveryCodes: c} })
}

// resetSecondFactor removes an operator's TOTP (admins; a lost device).
func (a *API) resetSecondFactor(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	a.replyNoContent(w, r, a.operators.ResetSecondFactor(r.Context(), p, r.PathValue("id")))
}

type authSettings struct {
	RequireAdminSecondFactor *bool   `json:"requireAdminSecondFactor"`
	SSOOnly                  *bool   `json:"ssoOnly"`
	BreakGlassEmail          *string `json:"breakGlassEmail"`
}

func authSettingsOut(s operators.AuthSettings) authSettings {
	return authSettings{RequireAdminSecondFactor: &s.RequireAdminSecondFactor, SSOOnly: &s.SSOOnly, BreakGlassEmail: &s.BreakGlassEmail}
}

func (a *API) getAuthSettings(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	set, err := a.operators.AuthSettings(r.Context(), p)
	reply(a, w, r, http.StatusOK, set, err, authSettingsOut)
}

// patchAuthSettings changes the settings named in the body.
func (a *API) patchAuthSettings(w http.ResponseWriter, r *http.Request, p operators.Principal) {
	var req authSettings
	if !decodeBody(w, r, MaxBodyBytes, &req) {
		return
	}
	set, err := a.operators.AuthSettings(r.Context(), p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if req.RequireAdminSecondFactor != nil {
		set.RequireAdminSecondFactor = *req.RequireAdminSecondFactor
	}
	if req.SSOOnly != nil {
		set.SSOOnly = *req.SSOOnly
	}
	if req.BreakGlassEmail != nil {
		set.BreakGlassEmail = *req.BreakGlassEmail
	}
	if err := a.operators.SetAuthSettings(r.Context(), p, set); err != nil {
		a.fail(w, r, err)
		return
	}
	set, err = a.operators.AuthSettings(r.Context(), p)
	reply(a, w, r, http.StatusOK, set, err, authSettingsOut)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
