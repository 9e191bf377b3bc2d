package controlapi

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/rxc-project/rxc/sdk/problem"
)

const (
	corsMethods = "GET, POST, PATCH, DELETE"
	// corsHeaders: Idempotency-Key lets the console retry a command or a
	// batch without making a second one.
	corsHeaders = "Content-Type, Authorization, Idempotency-Key"
	corsMaxAge  = "600"
	// corsExpose lets the console read Retry-After (a 429 login_throttled
	// or a 503 says how long to wait); it is not a CORS-safelisted header.
	corsExpose = "Retry-After"
)

// cors adds the CORS response headers for an allowed origin; other origins
// get none, so the browser keeps their scripts from reading the answer.
func (a *API) cors(h http.Header, r *http.Request) {
	h.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if origin == "" || !a.allowedOrigin(origin) {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true")
	h.Set("Access-Control-Expose-Headers", corsExpose)
}

// preflight answers a CORS preflight: 204 with the allowed methods and
// headers for an allowed origin, 403 otherwise.
func (a *API) preflight(w http.ResponseWriter, r *http.Request) {
	if !a.allowedOrigin(r.Header.Get("Origin")) {
		problem.Write(w, r, originProblem())
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	h.Add("Vary", "Access-Control-Request-Method")
	h.Add("Vary", "Access-Control-Request-Headers")
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) allowedOrigin(origin string) bool {
	canon, ok := canonicalOrigin(origin)
	return ok && a.origins[canon]
}

// sameOrigin refuses state-changing requests that a browser sent from a
// foreign page: the Origin header (or, without it, the Referer's origin) must
// be an allowed origin or this API's own host. Requests carrying neither
// (CLI tools, scripts) are not cross-site and pass.
func (a *API) sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || a.trustedOrigin(r) {
			next(w, r)
			return
		}
		problem.Write(w, r, originProblem())
	}
}

func (a *API) trustedOrigin(r *http.Request) bool {
	source := r.Header.Get("Origin")
	if source == "" {
		ref := r.Header.Get("Referer")
		if ref == "" {
			// Without either header only Sec-Fetch-Site can still tell a
			// cross-site browser request apart.
			return r.Header.Get("Sec-Fetch-Site") != "cross-site"
		}
		u, err := url.Parse(ref)
		if err != nil {
			return false
		}
		source = u.Scheme + "://" + u.Host
	}
	canon, ok := canonicalOrigin(source)
	if !ok {
		return false // includes "null", sent by sandboxed and privacy-sensitive contexts
	}
	if a.origins[canon] {
		return true
	}
	// Same host as the request: the SPA served through the same name.
	host := canon[strings.Index(canon, "://")+3:]
	return strings.EqualFold(host, r.Host)
}

func originProblem() *problem.Problem {
	return problem.For(problem.CodeOriginNotAllowed, "requests from this origin are refused; add it to CORS_ALLOWED_ORIGINS if it serves the console")
}
