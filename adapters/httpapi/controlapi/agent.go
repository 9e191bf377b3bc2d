package controlapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/agentwire"
	"github.com/rxc-project/rxc/adapters/httpapi/problem"
	"github.com/rxc-project/rxc/core/fleet"
)

// maxBearerLen bounds the Authorization value looked at; real tokens are 43
// characters.
const maxBearerLen = 512

func (a *API) redeem(w http.ResponseWriter, r *http.Request) {
	if ok, wait := a.redeemLimiter.allow(clientKey(r, a.trustProxy)); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		problem.Write(w, r, problem.New(http.StatusTooManyRequests, problem.CodeRateLimited, "Too many attempts",
			"too many claim code attempts from this address; retry after the time in Retry-After"))
		return
	}
	var req agentwire.RedeemRequest
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		problem.Write(w, r, p)
		return
	}
	red, err := a.fleet.RedeemClaimCode(r.Context(), req.ClaimCode, req.Hostname)
	if err != nil {
		a.failSensor(w, r, err)
		return
	}
	problem.WriteJSON(w, http.StatusCreated, agentwire.RedeemResponse{
		SensorID: red.SensorID, TenantID: red.TenantID, EnrollmentToken: red.EnrollmentToken, ExpiresAt: red.ExpiresAt.UTC(),
	})
}

// sensorRequest reads what enrol and renew share: the sensor id, the bearer
// token and the CSR. On failure it has answered.
func (a *API) sensorRequest(w http.ResponseWriter, r *http.Request) (id, token string, req agentwire.EnrollRequest, ok bool) {
	if id, ok = a.pathID(w, r); !ok {
		return "", "", req, false
	}
	token, ok = bearer(r)
	if !ok {
		a.failSensor(w, r, fleet.ErrInvalidToken)
		return "", "", req, false
	}
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		problem.Write(w, r, p)
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
	id, ok := a.pathID(w, r)
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
		problem.Write(w, r, p)
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
