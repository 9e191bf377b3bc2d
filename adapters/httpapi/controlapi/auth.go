package controlapi

import (
	"net/http"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/problem"
	"github.com/rxc-project/rxc/core/operators"
)

// operatorHandler is a route that needs a logged-in operator.
type operatorHandler func(w http.ResponseWriter, r *http.Request, op operators.Operator)

// operator checks the origin of state-changing requests, then the session
// cookie, and passes the operator on.
func (a *API) operator(next operatorHandler) http.HandlerFunc {
	return a.sameOrigin(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(SessionCookie)
		if err != nil {
			a.fail(w, r, operators.ErrUnauthenticated)
			return
		}
		op, err := a.operators.Authenticate(r.Context(), c.Value)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		next(w, r, op)
	})
}

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (a *API) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		problem.Write(w, r, p)
		return
	}
	_, token, expires, err := a.operators.Login(r.Context(), req.Email, req.Password)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	maxAge := int(expires.Sub(a.clock()) / time.Second)
	if maxAge < 1 {
		maxAge = 1
	}
	http.SetCookie(w, a.sessionCookie(token, maxAge))
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(SessionCookie); err == nil {
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
	Email string `json:"email"`
}

func (a *API) me(w http.ResponseWriter, _ *http.Request, op operators.Operator) {
	problem.WriteJSON(w, http.StatusOK, meResponse{Email: op.Email})
}
