package controlapi

import (
	"net/http"
	"time"
)

// sensorHost lends the sensors' routes (package sensorapi) this API's audit
// trail, problem mapping and client addresses.
type sensorHost struct{ a *API }

func (h sensorHost) Audited(action string, next http.HandlerFunc) http.HandlerFunc {
	return h.a.audited(action, next)
}

func (h sensorHost) NoteActor(r *http.Request, actor, target, tenantID string) {
	if n := noteOf(r); n != nil {
		n.actor, n.target, n.tenant = actor, target, tenantID
	}
}

func (h sensorHost) Fail(w http.ResponseWriter, r *http.Request, err error) { h.a.fail(w, r, err) }

func (h sensorHost) FailSensor(w http.ResponseWriter, r *http.Request, err error) {
	h.a.failSensor(w, r, err)
}

func (h sensorHost) AllowRedeem(r *http.Request) (bool, time.Duration) {
	return h.a.redeemLimiter.allow(clientKey(r, h.a.trustProxy))
}
