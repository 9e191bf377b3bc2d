package controlapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/sdk/agentwire"
	"github.com/rxc-project/rxc/sdk/problem"
)

// maxBearerLen bounds the Authorization value looked at; real tokens are 43
// characters.
const maxBearerLen = 512

func (a *API) redeem(w http.ResponseWriter, r *http.Request) {
	// Audited with the sensor as the actor once it has an id; a refused
	// attempt as "sensor" from its address (the code is a secret, never
	// recorded).
	a.noteSensor(r, "", "")
	if ok, wait := a.redeemLimiter.allow(clientKey(r, a.trustProxy)); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		a.fail(w, r, problem.For(problem.CodeRateLimited,
			"too many claim code attempts from this address; retry after the time in Retry-After").WithTitle("Too many attempts"))
		return
	}
	var req agentwire.RedeemRequest
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		a.fail(w, r, p)
		return
	}
	red, err := a.fleet.RedeemClaimCode(r.Context(), req.ClaimCode, req.Hostname)
	if err != nil {
		a.failSensor(w, r, err)
		return
	}
	a.noteSensor(r, red.SensorID, red.TenantID)
	problem.WriteJSON(w, http.StatusCreated, agentwire.RedeemResponse{
		SensorID: red.SensorID, TenantID: red.TenantID, EnrollmentToken: red.EnrollmentToken, ExpiresAt: red.ExpiresAt.UTC(),
	})
}

// sensorRequest reads what enrol and renew share: the sensor id, the bearer
// token and the CSR. On failure it has answered.
func (a *API) sensorRequest(w http.ResponseWriter, r *http.Request) (id, token string, req agentwire.EnrollRequest, ok bool) {
	if id, ok = a.sensorCaller(w, r); !ok {
		return "", "", req, false
	}
	token, ok = bearer(r)
	if !ok {
		a.failSensor(w, r, fleet.ErrInvalidToken)
		return "", "", req, false
	}
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		a.fail(w, r, p)
		return "", "", req, false
	}
	return id, token, req, true
}

func (a *API) enroll(w http.ResponseWriter, r *http.Request) {
	id, token, req, ok := a.sensorRequest(w, r)
	if !ok {
		return
	}
	e, err := a.fleet.EnrollLabeled(r.Context(), id, token, []byte(req.CSR), req.Labels)
	if err != nil {
		a.failSensor(w, r, err)
		return
	}
	out := agentwire.EnrollResponse{
		SensorID: e.SensorID, TenantID: e.TenantID,
		Certificate: string(e.Certificate.CertificatePEM), CACertificate: string(e.CACertificatePEM),
		Serial: e.Certificate.Serial, NotAfter: e.Certificate.NotAfter.UTC(),
		SensorToken: e.SensorToken, GRPC: agentwire.GRPC{Address: a.grpcAddr},
	}
	out.NATS = a.natsJSON(e.NATS)
	problem.WriteJSON(w, http.StatusCreated, out)
}

// natsJSON is the nats block of enrolment and renewal; nil without
// provisioning.
func (a *API) natsJSON(n *fleet.NATSCredentials) *agentwire.NATS {
	if n == nil {
		return nil
	}
	return &agentwire.NATS{
		NATSAddress: agentwire.NATSAddress{
			URL: a.natsURL, Stream: n.Stream, Consumer: n.Consumer, JSAPIPrefix: n.JSAPIPrefix,
			InboxPrefix: n.InboxPrefix, CommandSubject: n.CommandSubject, StatusSubject: n.StatusSubject,
		},
		Creds: n.Creds,
	}
}

func (a *API) renew(w http.ResponseWriter, r *http.Request) {
	id, ok := a.sensorCaller(w, r)
	if !ok {
		return
	}
	token, ok := bearer(r)
	if !ok {
		a.failSensor(w, r, fleet.ErrInvalidToken)
		return
	}
	var req agentwire.RenewRequest
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		a.fail(w, r, p)
		return
	}
	var proof *fleet.PossessionProof
	if req.Proof != nil {
		sig, err := base64.StdEncoding.DecodeString(req.Proof.Signature)
		if err != nil {
			a.failSensor(w, r, fmt.Errorf("%w: signature is not base64", fleet.ErrInvalidProof))
			return
		}
		proof = &fleet.PossessionProof{CertificatePEM: []byte(req.Proof.Certificate), SignedAt: req.Proof.SignedAt, Signature: sig}
	}
	rn, err := a.fleet.Renew(r.Context(), id, token, []byte(req.CSR), proof)
	if err != nil {
		a.failSensor(w, r, err)
		return
	}
	c := rn.Certificate
	problem.WriteJSON(w, http.StatusOK, agentwire.RenewResponse{
		SensorID: id, SensorToken: rn.SensorToken, Certificate: string(c.CertificatePEM), CACertificate: string(a.caPEM()),
		Serial: c.Serial, NotAfter: c.NotAfter.UTC(), NATS: a.natsJSON(rn.NATS),
	})
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > maxBearerLen {
		return "", false
	}
	scheme, token, found := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// SensorActorPrefix begins the audit actor of a sensor's own call:
// "sensor:<id>", or "sensor" alone before it has an id (a redemption).
const SensorActorPrefix = "sensor"

// noteSensor names the sensor (and its tenant, once known) as the actor of
// an audited call.
func (a *API) noteSensor(r *http.Request, sensorID, tenantID string) {
	n := noteOf(r)
	if n == nil {
		return
	}
	n.actor, n.target, n.tenant = SensorActorPrefix, sensorID, tenantID
	if sensorID != "" {
		n.actor = SensorActorPrefix + ":" + sensorID
	}
}

// sensorCaller reads the {id} of a sensor's own route and notes the sensor
// as the audit actor, with its tenant when it exists, so that a refused
// attempt on a tenant's sensor is in that tenant's trail too. On failure
// it has answered.
func (a *API) sensorCaller(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := ids.Validate(id); err != nil {
		a.noteSensor(r, "", "")
		a.fail(w, r, err)
		return "", false
	}
	tenant := ""
	if s, err := a.fleet.Sensor(r.Context(), id); err == nil {
		tenant = s.TenantID
	}
	a.noteSensor(r, id, tenant)
	return id, true
}
