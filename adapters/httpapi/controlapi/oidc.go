package controlapi

import (
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/rxc-project/rxc/adapters/oidcsignin"
	"github.com/rxc-project/rxc/core/operators"
	"github.com/rxc-project/rxc/sdk/logkey"
	"github.com/rxc-project/rxc/sdk/problem"
)

// oidcCookie keeps a sign-in attempt (state, nonce, PKCE verifier) between
// the redirect to the provider and the callback, in the browser: any
// replica can finish what another began.
const oidcCookie = "rxc_oidc"

// oidcAttemptTTL bounds how long a sign-in at the provider may take.
const oidcAttemptTTL = 10 * time.Minute

type providersResponse struct {
	OIDC *oidcProviderJSON `json:"oidc"`
}

type oidcProviderJSON struct {
	DisplayName string `json:"displayName"`
	LoginURL    string `json:"loginUrl"`
}

// providers tells the console which sign-in methods exist (no
// authentication: the login page asks).
func (a *API) providers(w http.ResponseWriter, _ *http.Request) {
	var out providersResponse
	if a.oidc != nil {
		out.OIDC = &oidcProviderJSON{DisplayName: a.oidcName, LoginURL: "/api/auth/oidc/login"}
	}
	problem.WriteJSON(w, http.StatusOK, out)
}

func (a *API) oidcAttemptCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: oidcCookie, Value: value, Path: "/api/auth/oidc", MaxAge: maxAge,
		HttpOnly: true, Secure: !a.localMode, SameSite: http.SameSiteLaxMode,
	}
}

// withOIDC answers 404 while single sign-on is not configured.
func (a *API) withOIDC(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.oidc == nil {
			problem.Write(w, r, problem.For(problem.CodeRouteNotFound, "single sign-on is not configured (OIDC_ISSUER_URL)"))
			return
		}
		h(w, r)
	}
}

// oidcLogin sends the browser to the provider with a fresh attempt.
func (a *API) oidcLogin(w http.ResponseWriter, r *http.Request) {
	attempt, url, err := a.oidc.Begin(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	http.SetCookie(w, a.oidcAttemptCookie(oidcsignin.EncodeAttempt(attempt), int(oidcAttemptTTL/time.Second)))
	http.Redirect(w, r, url, http.StatusFound)
}

// oidcCallback finishes a sign-in: the state must match the attempt's
// cookie (which is spent either way), the provider's code is exchanged and
// its ID token validated, and the person signed in with the same session
// cookie as a password login, then sent to the console.
func (a *API) oidcCallback(w http.ResponseWriter, r *http.Request) {
	n := noteOf(r)
	if n != nil {
		n.actor = "(single sign-on)"
	}
	http.SetCookie(w, a.oidcAttemptCookie("", -1))
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		a.fail(w, r, refused("the provider answered "+auditEmail(e)))
		return
	}
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		a.fail(w, r, refused("no sign-in in progress in this browser (or it took longer than 10 minutes)"))
		return
	}
	attempt, ok := oidcsignin.DecodeAttempt(c.Value)
	state := q.Get("state")
	if !ok || state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(attempt.State)) != 1 {
		a.fail(w, r, refused("the state does not match this browser's sign-in"))
		return
	}
	code := q.Get("code")
	if code == "" || len(code) > 2048 {
		a.fail(w, r, refused("no authorization code"))
		return
	}
	id, err := a.oidc.Finish(r.Context(), attempt, code)
	if err != nil {
		a.log.Warn("single sign-on refused", "source", clientKey(r, a.trustProxy), logkey.Error, err.Error())
		a.fail(w, r, err)
		return
	}
	if n != nil && id.Email != "" {
		n.actor = auditEmail(id.Email)
	}
	o, token, expires, err := a.operators.SignInFederated(r.Context(), id, a.oidcGroups)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if n != nil {
		p := o.Principal()
		n.principal = &p
		n.target = o.ID
	}
	maxAge := max(int(expires.Sub(a.clock())/time.Second), 1)
	http.SetCookie(w, a.sessionCookie(token, maxAge))
	http.Redirect(w, r, a.consoleURL, http.StatusFound)
}

type refusal string

func (r refusal) Error() string { return string(r) }
func (r refusal) Unwrap() error { return operators.ErrFederationRefused }

func refused(why string) error { return refusal("single sign-on refused: " + why) }
