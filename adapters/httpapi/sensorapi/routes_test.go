package sensorapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/httpapi/sensorapi"
	"github.com/rxc-project/rxc/core/fleet"
)

// The routes end to end (real fleet, audit trail, problems) are tested
// where they are served: adapters/httpapi/controlapi (sensor_test.go,
// errors_test.go, flow_test.go, attack_renewal_test.go). These tests hold
// what this package decides itself.

type fakeFleet struct {
	renewed, enrolled []string // "id token"
}

func (f *fakeFleet) RedeemClaimCode(_ context.Context, code, _ string) (fleet.Redemption, error) {
	if code != "good" {
		return fleet.Redemption{}, fleet.ErrInvalidClaimCode
	}
	return fleet.Redemption{SensorID: "s1", TenantID: "acme", EnrollmentToken: "tok", ExpiresAt: time.Unix(0, 0)}, nil
}

func (f *fakeFleet) EnrollProven(_ context.Context, id, token string, _ []byte, _ map[string]string, proof *fleet.EnrolmentProof) (fleet.Enrollment, error) {
	if proof != nil {
		token += " proof " + string(proof.Signature) + " " + proof.SignedAt.UTC().Format(time.RFC3339)
	}
	f.enrolled = append(f.enrolled, id+" "+token)
	return fleet.Enrollment{SensorID: id, TenantID: "acme"}, nil
}

func (f *fakeFleet) Renew(_ context.Context, id, token string, _ []byte, _ *fleet.PossessionProof) (fleet.Renewal, error) {
	f.renewed = append(f.renewed, id+" "+token)
	return fleet.Renewal{}, nil
}

func (f *fakeFleet) Sensor(_ context.Context, id string) (fleet.Sensor, error) {
	if id != "s1" {
		return fleet.Sensor{}, fleet.ErrNotFound
	}
	return fleet.Sensor{ID: id, TenantID: "acme"}, nil
}

type fakeHost struct {
	limited bool
	actors  []string // "actor target tenant"
	failed  []error
}

func (h *fakeHost) Audited(_ string, next http.HandlerFunc) http.HandlerFunc { return next }
func (h *fakeHost) NoteActor(_ *http.Request, actor, target, tenant string) {
	h.actors = append(h.actors, actor+" "+target+" "+tenant)
}
func (h *fakeHost) Fail(w http.ResponseWriter, _ *http.Request, err error) {
	h.failed = append(h.failed, err)
	w.WriteHeader(http.StatusBadRequest)
}
func (h *fakeHost) FailSensor(w http.ResponseWriter, r *http.Request, err error) { h.Fail(w, r, err) }
func (h *fakeHost) AllowRedeem(*http.Request) (bool, time.Duration) {
	return !h.limited, 1500 * time.Millisecond
}

func newRoutes(t *testing.T) (*http.ServeMux, *fakeFleet, *fakeHost) {
	t.Helper()
	f, h := &fakeFleet{}, &fakeHost{}
	rt, err := sensorapi.New(sensorapi.Config{Fleet: f, Host: h, CACertificatePEM: func() []byte { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	rt.Register(mux)
	return mux, f, h
}

func call(mux http.Handler, path, bearer, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		r.Header.Set("Authorization", bearer)
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	return w
}

func TestBearer(t *testing.T) {
	for h, want := range map[string]string{
		"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": "", "Bearer ": "", "": "",
		"Bearer " + strings.Repeat("a", 600): "",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", h)
		got, ok := sensorapi.Bearer(r)
		if got != want || ok != (want != "") {
			t.Errorf("Bearer(%.20q) = %q, %v; want %q", h, got, ok, want)
		}
	}
}

// A sensor's route without a bearer token, or with a proof whose
// signature is not base64, never reaches the fleet.
func TestRoutesRefuseBeforeTheFleet(t *testing.T) {
	mux, f, h := newRoutes(t)
	if w := call(mux, "/api/sensors/s1/agent/enroll", "", `{"csr":"x"}`); w.Code != http.StatusBadRequest || !errors.Is(h.failed[0], fleet.ErrInvalidToken) {
		t.Errorf("enrol without a token: %d, %v", w.Code, h.failed)
	}
	if w := call(mux, "/api/sensors/s1/agent/renew", "Bearer tok", `{"csr":"x","proof":{"certificate":"c","signedAt":"2026-01-01T00:00:00Z","signature":"not base64!"}}`); w.Code != http.StatusBadRequest || !errors.Is(h.failed[1], fleet.ErrInvalidProof) {
		t.Errorf("renew with a bad signature: %d, %v", w.Code, h.failed)
	}
	if w := call(mux, "/api/sensors/s1/agent/enroll", "Bearer tok", `{"csr":"x","proof":{"signedAt":"2026-01-01T00:00:00Z","signature":"not base64!"}}`); w.Code != http.StatusBadRequest || !errors.Is(h.failed[2], fleet.ErrInvalidProof) {
		t.Errorf("enrol with a bad signature: %d, %v", w.Code, h.failed)
	}
	if w := call(mux, "/api/sensors/a.b/agent/renew", "Bearer tok", `{"csr":"x"}`); w.Code != http.StatusBadRequest {
		t.Errorf("renew of a bad id: %d", w.Code)
	}
	if len(f.enrolled)+len(f.renewed) != 0 {
		t.Errorf("the fleet was called: %v %v", f.enrolled, f.renewed)
	}
	// Positive control: with a token the call goes through, the sensor
	// and its tenant named as the audited actor.
	if w := call(mux, "/api/sensors/s1/agent/enroll", "Bearer tok", `{"csr":"x"}`); w.Code != http.StatusCreated || len(f.enrolled) != 1 || f.enrolled[0] != "s1 tok" {
		t.Errorf("enrol with a token: %d, %v", w.Code, f.enrolled)
	}
	// The enrolment's proof reaches the fleet decoded.
	if w := call(mux, "/api/sensors/s1/agent/enroll", "Bearer tok", `{"csr":"x","proof":{"signedAt":"2026-01-01T00:00:00Z","signature":"c2ln"}}`); w.Code != http.StatusCreated || len(f.enrolled) != 2 || f.enrolled[1] != "s1 tok proof sig 2026-01-01T00:00:00Z" {
		t.Errorf("enrol with a proof: %d, %v", w.Code, f.enrolled)
	}
	if last := h.actors[len(h.actors)-1]; last != "sensor:s1 s1 acme" {
		t.Errorf("audited actor %q, want sensor:s1 on s1 of acme", last)
	}
}

func TestRedeemIsRateLimited(t *testing.T) {
	mux, _, h := newRoutes(t)
	if w := call(mux, "/api/sensors/claim/redeem", "", `{"claimCode":"good"}`); w.Code != http.StatusCreated {
		t.Fatalf("redeem: %d %s", w.Code, w.Body)
	}
	if last := h.actors[len(h.actors)-1]; last != "sensor:s1 s1 acme" {
		t.Errorf("audited actor %q after a redemption", last)
	}
	h.limited = true
	w := call(mux, "/api/sensors/claim/redeem", "", `{"claimCode":"good"}`)
	if w.Code != http.StatusBadRequest || w.Header().Get("Retry-After") != "2" {
		t.Errorf("limited redeem: %d, Retry-After %q; want the problem and 2 s", w.Code, w.Header().Get("Retry-After"))
	}
}
