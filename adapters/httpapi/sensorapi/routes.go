// Package sensorapi is the control plane's HTTP edge for sensors (agents):
// claim code redemption, enrolment and renewal, authenticated by the claim
// code and then by bearer tokens, never by an operator's session. Its
// bodies are agentwire's, which the sensor side (sensorclient) reads. The
// routes are served by the control plane's API (controlapi), which lends
// them its audit trail, its one error mapping and its client addresses
// through Host; the business rules stay in core/fleet.
package sensorapi

import (
	"context"
	"encoding/base64"
	"errors"
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

// MaxBodyBytes is the largest request body accepted (64 KiB).
const MaxBodyBytes = 64 << 10

// maxBearerLen bounds the Authorization value looked at; real tokens are 43
// characters.
const maxBearerLen = 512

// Fleet is what the sensor routes call: redemption, enrolment, renewal,
// and the sensor lookup that names a caller's tenant in the audit trail.
type Fleet interface {
	RedeemClaimCode(ctx context.Context, code, hostname string) (fleet.Redemption, error)
	EnrollProven(ctx context.Context, sensorID, enrollmentToken string, csrPEM []byte, labels map[string]string, proof *fleet.EnrolmentProof) (fleet.Enrollment, error)
	Renew(ctx context.Context, sensorID, sensorToken string, csrPEM []byte, proof *fleet.PossessionProof) (fleet.Renewal, error)
	Sensor(ctx context.Context, id string) (fleet.Sensor, error)
}

// Host is what the API serving the routes lends them, so that sensors'
// calls share the operators' audit trail, problem mapping and client
// addressing.
type Host interface {
	// Audited records h's calls in the audit trail under action.
	Audited(action string, h http.HandlerFunc) http.HandlerFunc
	// NoteActor names the audited call's actor, target and tenant.
	NoteActor(r *http.Request, actor, target, tenantID string)
	// Fail answers err as a problem.
	Fail(w http.ResponseWriter, r *http.Request, err error)
	// FailSensor answers err as a problem to a sensor on its own route
	// (a revoked sensor is 403 there).
	FailSensor(w http.ResponseWriter, r *http.Request, err error)
	// AllowRedeem reports whether the client may try a claim code now,
	// else how long it must wait.
	AllowRedeem(r *http.Request) (bool, time.Duration)
}

// Config wires the Routes.
type Config struct {
	Fleet Fleet
	Host  Host
	// CACertificatePEM returns the sensor CA certificate sent with renewed
	// certificates (enrolment takes it from the fleet's result).
	CACertificatePEM func() []byte
	// PublicNATSURL and PublicGRPCAddr are the addresses enrolment tells
	// sensors to dial.
	PublicNATSURL  string
	PublicGRPCAddr string
}

// Routes are the sensors' routes.
type Routes struct {
	fleet    Fleet
	host     Host
	caPEM    func() []byte
	natsURL  string
	grpcAddr string
}

// New checks cfg and returns the Routes.
func New(cfg Config) (*Routes, error) {
	if cfg.Fleet == nil || cfg.Host == nil || cfg.CACertificatePEM == nil {
		return nil, errors.New("sensorapi: fleet, host and CACertificatePEM are required")
	}
	return &Routes{fleet: cfg.Fleet, host: cfg.Host, caPEM: cfg.CACertificatePEM, natsURL: cfg.PublicNATSURL, grpcAddr: cfg.PublicGRPCAddr}, nil
}

// Mux is where routes are registered (an http.ServeMux, or a recorder
// in front of one).
type Mux interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register adds the sensors' routes to m, each audited.
func (a *Routes) Register(m Mux) {
	m.HandleFunc("POST /api/sensors/claim/redeem", a.host.Audited("sensor.redeem", a.redeem))
	m.HandleFunc("POST /api/sensors/{id}/agent/enroll", a.host.Audited("sensor.enroll", a.enroll))
	m.HandleFunc("POST /api/sensors/{id}/agent/renew", a.host.Audited("sensor.renew", a.renew))
}

func (a *Routes) redeem(w http.ResponseWriter, r *http.Request) {
	// Audited with the sensor as the actor once it has an id; a refused
	// attempt as "sensor" from its address (the code is a secret, never
	// recorded).
	a.noteSensor(r, "", "")
	if ok, wait := a.host.AllowRedeem(r); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		a.host.Fail(w, r, problem.For(problem.CodeRateLimited,
			"too many claim code attempts from this address; retry after the time in Retry-After").WithTitle("Too many attempts"))
		return
	}
	var req agentwire.RedeemRequest
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		a.host.Fail(w, r, p)
		return
	}
	red, err := a.fleet.RedeemClaimCode(r.Context(), req.ClaimCode, req.Hostname)
	if err != nil {
		a.host.FailSensor(w, r, err)
		return
	}
	a.noteSensor(r, red.SensorID, red.TenantID)
	problem.WriteJSON(w, http.StatusCreated, agentwire.RedeemResponse{
		SensorID: red.SensorID, TenantID: red.TenantID, EnrollmentToken: red.EnrollmentToken, ExpiresAt: red.ExpiresAt.UTC(),
	})
}

// sensorRequest reads what enrol and renew share: the sensor id, the bearer
// token and the body (an agentwire.EnrollRequest or RenewRequest). On
// failure it has answered.
func sensorRequest[T any](a *Routes, w http.ResponseWriter, r *http.Request) (id, token string, req T, ok bool) {
	if id, ok = a.sensorCaller(w, r); !ok {
		return "", "", req, false
	}
	token, ok = Bearer(r)
	if !ok {
		a.host.FailSensor(w, r, fleet.ErrInvalidToken)
		return "", "", req, false
	}
	if p := problem.DecodeJSON(w, r, MaxBodyBytes, &req); p != nil {
		a.host.Fail(w, r, p)
		return "", "", req, false
	}
	return id, token, req, true
}

// proofSignature decodes a proof's base64 signature; on failure it has
// answered.
func (a *Routes) proofSignature(w http.ResponseWriter, r *http.Request, s string) ([]byte, bool) {
	sig, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		a.host.FailSensor(w, r, fmt.Errorf("%w: signature is not base64", fleet.ErrInvalidProof))
		return nil, false
	}
	return sig, true
}

func (a *Routes) enroll(w http.ResponseWriter, r *http.Request) {
	id, token, req, ok := sensorRequest[agentwire.EnrollRequest](a, w, r)
	if !ok {
		return
	}
	var proof *fleet.EnrolmentProof
	if req.Proof != nil {
		sig, ok := a.proofSignature(w, r, req.Proof.Signature)
		if !ok {
			return
		}
		proof = &fleet.EnrolmentProof{SignedAt: req.Proof.SignedAt, Signature: sig}
	}
	e, err := a.fleet.EnrollProven(r.Context(), id, token, []byte(req.CSR), req.Labels, proof)
	if err != nil {
		a.host.FailSensor(w, r, err)
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
func (a *Routes) natsJSON(n *fleet.NATSCredentials) *agentwire.NATS {
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

func (a *Routes) renew(w http.ResponseWriter, r *http.Request) {
	id, token, req, ok := sensorRequest[agentwire.RenewRequest](a, w, r)
	if !ok {
		return
	}
	var proof *fleet.PossessionProof
	if req.Proof != nil {
		sig, ok := a.proofSignature(w, r, req.Proof.Signature)
		if !ok {
			return
		}
		proof = &fleet.PossessionProof{CertificatePEM: []byte(req.Proof.Certificate), SignedAt: req.Proof.SignedAt, Signature: sig}
	}
	rn, err := a.fleet.Renew(r.Context(), id, token, []byte(req.CSR), proof)
	if err != nil {
		a.host.FailSensor(w, r, err)
		return
	}
	c := rn.Certificate
	problem.WriteJSON(w, http.StatusOK, agentwire.RenewResponse{
		SensorID: id, SensorToken: rn.SensorToken, Certificate: string(c.CertificatePEM), CACertificate: string(a.caPEM()),
		Serial: c.Serial, NotAfter: c.NotAfter.UTC(), NATS: a.natsJSON(rn.NATS),
	})
}

// Bearer returns the token of an "Authorization: Bearer <token>" header.
func Bearer(r *http.Request) (string, bool) {
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

// ActorPrefix begins the audit actor of a sensor's own call:
// "sensor:<id>", or "sensor" alone before it has an id (a redemption).
const ActorPrefix = "sensor"

// noteSensor names the sensor (and its tenant, once known) as the actor of
// an audited call.
func (a *Routes) noteSensor(r *http.Request, sensorID, tenantID string) {
	actor := ActorPrefix
	if sensorID != "" {
		actor = ActorPrefix + ":" + sensorID
	}
	a.host.NoteActor(r, actor, sensorID, tenantID)
}

// sensorCaller reads the {id} of a sensor's own route and notes the sensor
// as the audit actor, with its tenant when it exists, so that a refused
// attempt on a tenant's sensor is in that tenant's trail too. On failure
// it has answered.
func (a *Routes) sensorCaller(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := ids.Validate(id); err != nil {
		a.noteSensor(r, "", "")
		a.host.Fail(w, r, err)
		return "", false
	}
	tenant := ""
	if s, err := a.fleet.Sensor(r.Context(), id); err == nil {
		tenant = s.TenantID
	}
	a.noteSensor(r, id, tenant)
	return id, true
}
