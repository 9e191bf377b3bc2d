package controlapi

import (
	"net/http"

	"github.com/rxc-project/rxc/sdk/problem"
)

// The edge idiom of the operator routes in one place: read the body,
// call the service, answer its result or its error's problem.

// decodeBody reads the request's JSON body (at most limit bytes) into v;
// on failure it has answered the problem and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	if bad := problem.DecodeJSON(w, r, limit, v); bad != nil {
		problem.Write(w, r, bad)
		return false
	}
	return true
}

// reply answers out(v) as JSON with status, or err's problem (out is not
// called then).
func reply[T, J any](a *API, w http.ResponseWriter, r *http.Request, status int, v T, err error, out func(T) J) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	problem.WriteJSON(w, status, out(v))
}

// replyItems answers {"items": [...]} of in converted by out (writeItems),
// or err's problem.
func replyItems[T, J any](a *API, w http.ResponseWriter, r *http.Request, in []T, err error, out func(T) J) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeItems(w, in, out)
}

// replyNoContent answers 204, or err's problem.
func (a *API) replyNoContent(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// statusIfCreated is status (201, or 202 where the work goes on) for a
// request that created something, and 200 for a repeat that created nothing.
func statusIfCreated(created bool, status int) int {
	if created {
		return status
	}
	return http.StatusOK
}
