package sensorclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePlane answers the sensor routes of the control plane's HTTP API with
// a sensor CA that signs as the control plane's does, recording what it was sent.
type fakePlane struct {
	t   *testing.T
	ca  *testCA
	srv *httptest.Server

	mu       sync.Mutex
	requests []recorded
	// answer overrides the status of the next calls to a path.
	answer map[string]int
	// wrongKey makes enrol sign a different key than the CSR's.
	wrongKey bool
	// renewCreds are the NATS creds a renewal answers with; "" answers
	// without a nats block (provisioning disabled).
	renewCreds string
}

type recorded struct {
	path, auth string
	body       map[string]string
}

func newFakePlane(t *testing.T) *fakePlane {
	t.Helper()
	p := &fakePlane{t: t, ca: newTestCA(t), answer: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/sensors/claim/redeem", p.redeem)
	mux.HandleFunc("POST /api/sensors/{id}/agent/enroll", p.certificate(http.StatusCreated))
	mux.HandleFunc("POST /api/sensors/{id}/agent/renew", p.certificate(http.StatusOK))
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakePlane) record(r *http.Request) (map[string]string, int) {
	var raw map[string]json.RawMessage
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &raw); err != nil {
		p.t.Errorf("%s: body %q is not a JSON object: %v", r.URL.Path, data, err)
	}
	body := map[string]string{}
	for k, v := range raw {
		var s string
		if json.Unmarshal(v, &s) == nil {
			body[k] = s
		} else {
			body[k] = string(v)
		}
	}
	if strings.HasSuffix(r.URL.Path, "/renew") && !strings.Contains(body["proof"], `"signature"`) {
		p.t.Errorf("%s: renewal without a proof of possession: %s", r.URL.Path, data)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		p.t.Errorf("%s: Content-Type %q", r.URL.Path, ct)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, recorded{path: r.URL.Path, auth: r.Header.Get("Authorization"), body: body})
	return body, p.answer[r.URL.Path]
}

func problem(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "7")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "urn:rxc:problem:" + code, "title": "t", "status": status, "code": code, "detail": "detail of " + code})
}

func (p *fakePlane) redeem(w http.ResponseWriter, r *http.Request) {
	body, status := p.record(r)
	switch {
	case status != 0:
		problem(w, status, "forced")
	case body["claimCode"] != "GOOD-CODE":
		problem(w, http.StatusBadRequest, "invalid_claim_code")
	default:
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"sensorId": "s-1", "tenantId": "acme", "enrollmentToken": "enrol-token", "expiresAt": time.Now().Add(15 * time.Minute)})
	}
}

func (p *fakePlane) certificate(ok int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, status := p.record(r)
		if status != 0 {
			problem(w, status, "forced")
			return
		}
		csr := []byte(body["csr"])
		p.mu.Lock()
		wrong := p.wrongKey
		p.mu.Unlock()
		if wrong {
			other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			csr = []byte(csrFor(p.t, other))
		}
		c, err := p.ca.SignCSR(csr, "acme", r.PathValue("id"), time.Hour)
		if err != nil {
			problem(w, http.StatusBadRequest, "invalid_csr")
			return
		}
		answer := map[string]any{
			"sensorId": r.PathValue("id"), "tenantId": "acme", "certificate": string(c.CertificatePEM),
			"caCertificate": string(p.ca.CACertificatePEM()), "serial": c.Serial, "notAfter": c.NotAfter, "sensorToken": "sensor-token",
			"grpc": map[string]string{"address": "127.0.0.1:5010"},
		}
		creds := "CREDS"
		if strings.HasSuffix(r.URL.Path, "/renew") {
			p.mu.Lock()
			creds = p.renewCreds
			p.mu.Unlock()
		}
		if creds != "" {
			answer["nats"] = map[string]string{"url": "nats://127.0.0.1:4222", "creds": creds, "stream": "RXC_CMD", "consumer": "cmd-acme-s-1",
				"jsApiPrefix": "ctrl.API", "inboxPrefix": "_INBOX_acme_s-1", "commandSubject": "rxc.acme.s-1.cmd", "statusSubject": "rxc.acme.s-1.status"}
		}
		w.WriteHeader(ok)
		_ = json.NewEncoder(w).Encode(answer)
	}
}

func csrFor(t *testing.T, key *ecdsa.PrivateKey) string {
	t.Helper()
	_, _, csr, err := keyAndCSR(key, "x")
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func newEnroller(t *testing.T, base string) *Enroller {
	t.Helper()
	e, err := NewEnroller(EnrollerConfig{BaseURL: base, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEnrollerRedeemEnrolRenew(t *testing.T) {
	t.Parallel()
	p := newFakePlane(t)
	e := newEnroller(t, p.srv.URL+"/api/")
	ctx := context.Background()

	red, err := e.Redeem(ctx, " GOOD-CODE\n", "edge-1.local")
	if err != nil {
		t.Fatal(err)
	}
	if red.SensorID != "s-1" || red.TenantID != "acme" || red.EnrollmentToken != "enrol-token" {
		t.Fatalf("redemption %+v", red)
	}
	st, err := e.Enroll(ctx, red)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := st.TLSCertificate()
	if err != nil {
		t.Fatalf("enrolled state's certificate: %v", err)
	}
	if st.SensorToken != "sensor-token" || st.NATS == nil || st.NATS.InboxPrefix != "_INBOX_acme_s-1" || string(st.Creds) != "CREDS" ||
		st.GRPCAddress != "127.0.0.1:5010" || st.Serial != serialHex(cert.Leaf) || st.ObtainedAt.IsZero() {
		t.Fatalf("enrolled state %+v", st)
	}
	if block, _ := pem.Decode(st.KeyPEM); block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("key PEM: %q", st.KeyPEM)
	}

	next, err := e.Renew(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if next.Serial == st.Serial || string(next.KeyPEM) == string(st.KeyPEM) {
		t.Fatal("renewal kept the serial or the key")
	}
	if _, err := next.TLSCertificate(); err != nil {
		t.Fatalf("renewed certificate: %v", err)
	}
	if next.SensorToken != st.SensorToken || next.NATS.Consumer != st.NATS.Consumer || string(next.Creds) != "CREDS" {
		t.Fatal("renewal without NATS credentials changed more than the certificate")
	}
	// A renewal that carries NATS credentials (a new user after an
	// upgrade) replaces the old ones; the state before stays as it was.
	p.mu.Lock()
	p.renewCreds = "NEW-CREDS"
	p.mu.Unlock()
	again, err := e.Renew(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Creds) != "NEW-CREDS" || again.NATS == nil || string(next.Creds) != "CREDS" {
		t.Fatalf("renewal with new creds: got %q (previous state now %q)", again.Creds, next.Creds)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	want := []struct{ path, auth, field string }{
		{"/api/sensors/claim/redeem", "", "claimCode"},
		{"/api/sensors/s-1/agent/enroll", "Bearer enrol-token", "csr"},
		{"/api/sensors/s-1/agent/renew", "Bearer sensor-token", "csr"},
		{"/api/sensors/s-1/agent/renew", "Bearer sensor-token", "csr"},
	}
	if len(p.requests) != len(want) {
		t.Fatalf("%d requests, want %d", len(p.requests), len(want))
	}
	for i, w := range want {
		got := p.requests[i]
		if got.path != w.path || got.auth != w.auth || got.body[w.field] == "" {
			t.Errorf("request %d: %s auth %q body %v; want %s auth %q with %s", i, got.path, got.auth, got.body, w.path, w.auth, w.field)
		}
	}
	if got := p.requests[0].body; got["claimCode"] != "GOOD-CODE" || got["hostname"] != "edge-1.local" || len(got) != 2 {
		t.Errorf("redeem body %v", got)
	}
	if csr := p.requests[1].body["csr"]; !strings.HasPrefix(csr, "-----BEGIN CERTIFICATE REQUEST-----") || len(p.requests[1].body) != 2 {
		t.Errorf("enrol body %v", p.requests[1].body)
	}
}

func TestEnrollerErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		path      string
		status    int
		call      func(e *Enroller) error
		want      error
		retryable bool
	}{
		{"unknown claim code", "", 0, func(e *Enroller) error { _, err := e.Redeem(context.Background(), "BAD", ""); return err }, ErrInvalidClaimCode, false},
		{"redeem rate limited", "/api/sensors/claim/redeem", 429, func(e *Enroller) error { _, err := e.Redeem(context.Background(), "GOOD-CODE", ""); return err }, ErrRateLimited, true},
		{"enrolment token refused", "/api/sensors/s-1/agent/enroll", 401, func(e *Enroller) error {
			_, err := e.Enroll(context.Background(), Redemption{SensorID: "s-1", EnrollmentToken: "x"})
			return err
		}, ErrUnauthorized, false},
		{"tenant not provisioned yet", "/api/sensors/s-1/agent/enroll", 409, func(e *Enroller) error {
			_, err := e.Enroll(context.Background(), Redemption{SensorID: "s-1", EnrollmentToken: "x"})
			return err
		}, nil, true},
		{"renew of a revoked sensor", "/api/sensors/s-1/agent/renew", 403, func(e *Enroller) error {
			_, err := e.Renew(context.Background(), certState(t, "t"))
			return err
		}, ErrUnauthorized, false},
		{"control plane unavailable", "/api/sensors/s-1/agent/renew", 503, func(e *Enroller) error {
			_, err := e.Renew(context.Background(), certState(t, "t"))
			return err
		}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newFakePlane(t)
			if tc.path != "" {
				p.answer[tc.path] = tc.status
			}
			err := tc.call(newEnroller(t, p.srv.URL))
			var api *APIError
			if !errors.As(err, &api) {
				t.Fatalf("err = %v, want an *APIError", err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if got := Retryable(err); got != tc.retryable {
				t.Errorf("Retryable(%v) = %v, want %v", err, got, tc.retryable)
			}
			wantWait := time.Duration(0)
			if tc.status == http.StatusTooManyRequests || tc.status == http.StatusServiceUnavailable {
				wantWait = 7 * time.Second
			}
			if got := RetryAfter(err); got != wantWait {
				t.Errorf("RetryAfter = %v, want %v", got, wantWait)
			}
		})
	}
}

func TestEnrollerRefusesACertificateForAnotherKey(t *testing.T) {
	t.Parallel()
	p := newFakePlane(t)
	p.wrongKey = true
	_, err := newEnroller(t, p.srv.URL).Enroll(context.Background(), Redemption{SensorID: "s-1", TenantID: "acme", EnrollmentToken: "x"})
	if !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("err = %v, want ErrKeyMismatch", err)
	}
}

func TestEnrollerDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var leaked sync.Map
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store("auth", r.Header.Get("Authorization"))
	}))
	defer target.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	_, err := newEnroller(t, redirect.URL).Renew(context.Background(), certState(t, "secret"))
	var api *APIError
	if !errors.As(err, &api) || api.Status != http.StatusTemporaryRedirect {
		t.Fatalf("err = %v, want the redirect as an APIError", err)
	}
	if _, ok := leaked.Load("auth"); ok {
		t.Fatal("the sensor token followed a redirect")
	}
}

func TestRetryableTransportErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := newEnroller(t, url).Redeem(context.Background(), "GOOD-CODE", "")
	if err == nil || !Retryable(err) {
		t.Fatalf("connection refused: err %v, Retryable %v; want retryable", err, Retryable(err))
	}
	if Retryable(context.Canceled) || Retryable(nil) {
		t.Fatal("cancellation or success counted as retryable")
	}
}

func TestNewEnrollerChecksURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:5009", "ftp://x", "http://"} {
		if _, err := NewEnroller(EnrollerConfig{BaseURL: u}); err == nil {
			t.Errorf("NewEnroller accepted %q", u)
		}
	}
}

func TestEnrollerVerifiesAnHTTPSAPIWithTheGivenCA(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"sensorId":"s-1","tenantId":"acme","enrollmentToken":"tok","expiresAt":"2026-11-21T09:15:00Z"}`))
	}))
	defer srv.Close()
	_, err := newEnroller(t, srv.URL).Redeem(context.Background(), "GOOD-CODE", "")
	if err == nil || Retryable(err) {
		t.Fatalf("unknown server CA: err %v, Retryable %v; want a permanent error", err, Retryable(err))
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	e, err := NewEnroller(EnrollerConfig{BaseURL: srv.URL, RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	if red, err := e.Redeem(context.Background(), "GOOD-CODE", ""); err != nil || red.SensorID != "s-1" {
		t.Fatalf("with the CA: %+v, %v", red, err)
	}
}

// certState is a state of sensor s-1 holding a key and a (self-signed)
// certificate for it: enough to sign a renewal.
func certState(t *testing.T, token string) *State {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	return &State{
		SensorID: "s-1", SensorToken: token,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}
}

// TestEnrollerDeclaresLabels: the configured labels go with the enrolment
// request, and only with it.
func TestEnrollerDeclaresLabels(t *testing.T) {
	t.Parallel()
	got := make(chan map[string]json.RawMessage, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		_ = json.NewDecoder(r.Body).Decode(&body)
		got <- body
		http.Error(w, "stop here", http.StatusTeapot)
	}))
	t.Cleanup(srv.Close)
	e, err := NewEnroller(EnrollerConfig{BaseURL: srv.URL, Timeout: 5 * time.Second, Labels: map[string]string{"site": "ams", "role": "edge"}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = e.Enroll(context.Background(), Redemption{SensorID: "s-1", TenantID: "acme", EnrollmentToken: "tok"})
	body := <-got
	var labels map[string]string
	if err := json.Unmarshal(body["labels"], &labels); err != nil || labels["site"] != "ams" || labels["role"] != "edge" || len(labels) != 2 {
		t.Errorf("enrolment body labels %s (%v), want site=ams, role=edge", body["labels"], err)
	}
	if _, ok := body["csr"]; !ok {
		t.Error("enrolment body without csr")
	}
}

// enrolProofVerifies reports whether an enrol request's proof is the CSR's
// key's signature over EnrolmentMessage.
func enrolProofVerifies(t *testing.T, sensorID string, body map[string]string) bool {
	t.Helper()
	block, _ := pem.Decode([]byte(body["csr"]))
	if block == nil {
		return false
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return false
	}
	var proof struct {
		SignedAt  time.Time `json:"signedAt"`
		Signature []byte    `json:"signature"`
	}
	if err := json.Unmarshal([]byte(body["proof"]), &proof); err != nil {
		return false
	}
	digest := sha256.Sum256(EnrolmentMessage(sensorID, []byte(body["csr"]), proof.SignedAt))
	return ecdsa.VerifyASN1(csr.PublicKey.(*ecdsa.PublicKey), digest[:], proof.Signature)
}

// TestEnrollInKeepsKeyAndCSR: the enrolment's key and CSR are on disk
// (0600) before the first request, every attempt and the first after a
// restart send the same CSR with a fresh proof by its key, the answer's
// certificate is for that key, and ClearRedemption removes them; a
// malformed request (400) ends them.
func TestEnrollInKeepsKeyAndCSR(t *testing.T) {
	t.Parallel()
	p := newFakePlane(t)
	e := newEnroller(t, p.srv.URL)
	ctx := context.Background()
	path := t.TempDir()
	dir, err := OpenStateDir(path)
	if err != nil {
		t.Fatal(err)
	}
	red := Redemption{SensorID: "s-1", TenantID: "acme", EnrollmentToken: "enrol-token", ExpiresAt: time.Now().Add(time.Hour)}
	enrol := "/api/sensors/s-1/agent/enroll"
	p.mu.Lock()
	p.answer[enrol] = http.StatusServiceUnavailable
	p.mu.Unlock()
	for range 2 {
		if _, err := e.EnrollIn(ctx, dir, red); !Retryable(err) {
			t.Fatalf("EnrollIn against a failing plane: %v", err)
		}
	}
	fi, err := os.Stat(filepath.Join(path, EnrolmentFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v; want a 0600 file", EnrolmentFile, fi, err)
	}
	// A restart: a new StateDir on the same directory.
	dir, err = OpenStateDir(path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	delete(p.answer, enrol)
	p.mu.Unlock()
	st, err := e.EnrollIn(ctx, dir, red)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	reqs := slices.Clone(p.requests)
	p.mu.Unlock()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.body["csr"] != reqs[0].body["csr"] {
			t.Errorf("attempt %d sent another CSR", i+1)
		}
		if !enrolProofVerifies(t, "s-1", r.body) {
			t.Errorf("attempt %d: proof %s does not verify with the CSR's key", i+1, r.body["proof"])
		}
		if i > 0 && r.body["proof"] == reqs[i-1].body["proof"] {
			t.Errorf("attempt %d sent the proof of the one before", i+1)
		}
	}
	kept, err := dir.pendingEnrolmentFor("s-1")
	if err != nil || string(st.KeyPEM) != kept.KeyPEM || kept.CSR != reqs[0].body["csr"] {
		t.Fatalf("the enrolled key is not the kept one (%v)", err)
	}
	if _, err := st.TLSCertificate(); err != nil {
		t.Fatal(err)
	}
	if err := dir.ClearRedemption(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(path, EnrolmentFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after ClearRedemption: %v", EnrolmentFile, err)
	}

	// A malformed request ends the kept enrolment; the next one has a new key.
	if _, err := dir.pendingEnrolmentFor("s-1"); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.answer[enrol] = http.StatusBadRequest
	p.mu.Unlock()
	if _, err := e.EnrollIn(ctx, dir, red); err == nil {
		t.Fatal("EnrollIn answered 400 succeeded")
	}
	if _, err := os.Stat(filepath.Join(path, EnrolmentFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after a 400: %v", EnrolmentFile, err)
	}
	// Another sensor's redemption does not reuse the kept key.
	other, err := dir.pendingEnrolmentFor("s-1")
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := dir.pendingEnrolmentFor("s-2"); err != nil || p2.KeyPEM == other.KeyPEM || p2.SensorID != "s-2" {
		t.Fatalf("another sensor's enrolment reused the kept key (%v)", err)
	}
}
