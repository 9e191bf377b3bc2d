package sensorclient

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rxc-project/rxc/sdk/agentwire"
	catalogue "github.com/rxc-project/rxc/sdk/problem"
)

// DefaultHTTPTimeout bounds one call to the control plane's HTTP API.
const DefaultHTTPTimeout = 15 * time.Second

// maxResponseBytes bounds a response body read from the API.
const maxResponseBytes = 1 << 20

// maxRetryAfter caps a server's Retry-After.
const maxRetryAfter = 10 * time.Minute

// RetryAfter is how long the server asked to wait before retrying err (0
// when it did not say).
func RetryAfter(err error) time.Duration {
	var api *APIError
	if errors.As(err, &api) {
		return api.RetryAfter
	}
	return 0
}

// Errors an Enroller's calls wrap (test with errors.Is).
var (
	// ErrInvalidClaimCode: the code is unknown, expired or used.
	ErrInvalidClaimCode = errors.New("claim code refused")
	// ErrUnauthorized: the enrolment or sensor token was refused, or the
	// sensor is revoked. Retrying cannot help.
	ErrUnauthorized = errors.New("sensor credentials refused by the control plane")
	// ErrRateLimited: too many attempts; retry later.
	ErrRateLimited = errors.New("rate limited by the control plane")
)

// APIError is a non-success answer of the control plane (an RFC 9457
// problem when it sent one).
type APIError struct {
	Status int
	Code   string
	Title  string
	Detail string
	// RetryAfter is the server's Retry-After (in seconds form), if any.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("control plane answered %d", e.Status)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	} else if e.Title != "" {
		msg += ": " + e.Title
	}
	return msg
}

// Unwrap maps the answer to this package's sentinels.
func (e *APIError) Unwrap() error {
	switch {
	case e.Code == string(catalogue.CodeInvalidClaimCode):
		return ErrInvalidClaimCode
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusForbidden:
		return ErrUnauthorized
	case e.Status == http.StatusTooManyRequests:
		return ErrRateLimited
	}
	return nil
}

// Retryable reports whether a failed API call may succeed later unchanged:
// transport failures, timeouts, 408, 409 (e.g. the tenant is still being
// provisioned), 425, 429 and 5xx. A server certificate that does not verify
// is a configuration error (--api-ca), not an outage.
func Retryable(err error) bool {
	var (
		api      *APIError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
	)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname):
		return false
	case !errors.As(err, &api):
		return true
	}
	switch api.Status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return api.Status >= 500
}

// EnrollerConfig configures an Enroller.
type EnrollerConfig struct {
	// BaseURL is the control plane's root, e.g. https://rxc.example.com or
	// http://localhost:5009 (without /api).
	BaseURL string
	// RootCAs verifies an https API; nil uses the system pool.
	RootCAs *x509.CertPool
	// Timeout bounds each call (default DefaultHTTPTimeout).
	Timeout time.Duration
	// UserAgent is sent with each call.
	UserAgent string
	// Client replaces the HTTP client built from RootCAs and Timeout.
	Client *http.Client
	// Labels are declared for the sensor at enrolment (nil: none).
	Labels map[string]string
}

// Enroller talks to the control plane's sensor routes.
type Enroller struct {
	base   *url.URL
	client *http.Client
	ua     string
	labels map[string]string
}

// NewEnroller checks cfg.
func NewEnroller(cfg EnrollerConfig) (*Enroller, error) {
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), "/api"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sensorclient: API URL %q must be http(s)://host[:port]", cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultHTTPTimeout
	}
	client := cfg.Client
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12}
		client = &http.Client{
			Transport: tr,
			Timeout:   cfg.Timeout,
			// Bearer tokens must not follow a redirect to another place.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "rxc-sensorclient"
	}
	return &Enroller{base: u, client: client, ua: ua, labels: maps.Clone(cfg.Labels)}, nil
}

// Redemption is a redeemed claim code: the sensor's id and its single-use
// enrolment token (the control plane's answer, kept in redemption.json).
type Redemption = agentwire.RedeemResponse

// Redeem exchanges a claim code for a sensor id and an enrolment token.
func (e *Enroller) Redeem(ctx context.Context, claimCode, hostname string) (Redemption, error) {
	body := agentwire.RedeemRequest{ClaimCode: strings.TrimSpace(claimCode), Hostname: hostname}
	var r Redemption
	if err := e.call(ctx, "/api/sensors/claim/redeem", "", body, http.StatusCreated, &r); err != nil {
		return Redemption{}, fmt.Errorf("redeem claim code: %w", err)
	}
	if r.SensorID == "" || r.EnrollmentToken == "" {
		return Redemption{}, errors.New("redeem claim code: answer without sensorId or enrollmentToken")
	}
	return r, nil
}

// certificateAnswer is an enrolment's or a renewal's answer (a renewal's
// fills the fields it has); the renewal journal keeps it as it came.
type certificateAnswer = agentwire.EnrollResponse

// Enroll generates a key and a CSR, enrols the redeemed sensor and returns
// its complete state (not yet saved). It keeps nothing on disk: an agent
// uses EnrollIn, which survives a lost answer and a restart.
func (e *Enroller) Enroll(ctx context.Context, r Redemption) (*State, error) {
	p, err := newPendingEnrolment(r.SensorID)
	if err != nil {
		return nil, err
	}
	return e.enroll(ctx, r, p)
}

// EnrollIn enrols like Enroll with the key and CSR kept in dir
// (EnrolmentFile): they are saved before the first request is sent and
// reused by every attempt, also after a restart, so a request whose answer
// was lost goes again unchanged but for a fresh proof of possession, and
// the control plane answers it again (see its enrolment documentation).
// The caller saves the returned state and then calls dir.ClearRedemption.
// A request the control plane refuses as malformed (400, 422) ends the
// kept enrolment: the next attempt starts with a new key.
func (e *Enroller) EnrollIn(ctx context.Context, dir *StateDir, r Redemption) (*State, error) {
	p, err := dir.pendingEnrolmentFor(r.SensorID)
	if err != nil {
		return nil, fmt.Errorf("enrol sensor %s: %w", r.SensorID, err)
	}
	st, err := e.enroll(ctx, r, p)
	var apiErr *APIError
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusBadRequest || apiErr.Status == http.StatusUnprocessableEntity) {
		_ = dir.clearEnrolment()
	}
	return st, err
}

func (e *Enroller) enroll(ctx context.Context, r Redemption, p *pendingEnrolment) (*State, error) {
	key, err := parseKeyPEM([]byte(p.KeyPEM))
	if err != nil {
		return nil, fmt.Errorf("enrol sensor %s: %w", r.SensorID, err)
	}
	proof, err := enrolmentProof(key, r.SensorID, p.CSR, time.Now())
	if err != nil {
		return nil, fmt.Errorf("enrol sensor %s: %w", r.SensorID, err)
	}
	var a certificateAnswer
	path := "/api/sensors/" + url.PathEscape(r.SensorID) + "/agent/enroll"
	req := agentwire.EnrollRequest{CSR: p.CSR, Labels: e.labels, Proof: &proof}
	if err := e.call(ctx, path, r.EnrollmentToken, req, http.StatusCreated, &a); err != nil {
		return nil, fmt.Errorf("enrol sensor %s: %w", r.SensorID, err)
	}
	if a.SensorToken == "" || a.GRPC.Address == "" {
		return nil, fmt.Errorf("enrol sensor %s: answer without sensorToken or grpc address", r.SensorID)
	}
	st := &State{
		SensorID: r.SensorID, TenantID: r.TenantID, SensorToken: a.SensorToken,
		GRPCAddress: a.GRPC.Address, EnrolledAt: time.Now().UTC(),
	}
	if a.TenantID != "" {
		st.TenantID = a.TenantID
	}
	st.setNATS(a)
	if err := st.setCertificate(key, []byte(p.KeyPEM), a); err != nil {
		return nil, fmt.Errorf("enrol sensor %s: %w", r.SensorID, err)
	}
	return st, nil
}

// enrolmentProof signs EnrolmentMessage for csr with the CSR's key (ECDSA
// P-256, SHA-256, ASN.1).
func enrolmentProof(key *ecdsa.PrivateKey, sensorID, csr string, now time.Time) (agentwire.EnrolProof, error) {
	now = now.UTC()
	digest := sha256.Sum256(EnrolmentMessage(sensorID, []byte(csr), now))
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		return agentwire.EnrolProof{}, fmt.Errorf("sign enrolment: %w", err)
	}
	return agentwire.EnrolProof{SignedAt: now, Signature: base64.StdEncoding.EncodeToString(sig)}, nil
}

// EnrolmentMessage is what an enrolment signs with the CSR's key: the
// sensor, the digest of the CSR and the signing time. It must match the
// control plane's fleet.EnrolmentMessage byte for byte (a test holds them
// together).
func EnrolmentMessage(sensorID string, csrPEM []byte, signedAt time.Time) []byte {
	h := sha256.Sum256(csrPEM)
	return []byte("rxc-enrol-v1\n" + sensorID + "\n" + hex.EncodeToString(h[:]) + "\n" + signedAt.UTC().Format(time.RFC3339Nano))
}

// Renew obtains a new certificate for a new key with the sensor token and
// returns the updated state (not yet saved): the key, certificate, CA,
// serial and expiry change, and the NATS credentials when the answer
// carries them. It keeps nothing on disk: an agent uses RenewIn, which
// survives a lost answer and a crash.
func (e *Enroller) Renew(ctx context.Context, st *State) (*State, error) {
	p, err := newPendingRenewal(st)
	if err != nil {
		return nil, err
	}
	next, _, err := e.renew(ctx, st, p)
	return next, err
}

// RenewIn renews like Renew, journaled in dir (RenewalFile): the new key and
// CSR are saved before the request is sent, so after a failure, a lost answer
// or a restart the same request goes again (the control plane answers it
// again, see its renewal documentation), and the answer is saved before it
// is returned, so StateDir.Load completes a Save that was interrupted. The
// caller saves the returned state and then calls dir.ClearRenewal. A request
// the control plane refuses as malformed (400, 422) ends the journal: the
// next attempt starts with a new key.
func (e *Enroller) RenewIn(ctx context.Context, dir *StateDir, st *State) (*State, error) {
	p, err := dir.loadRenewal()
	switch {
	case err == nil && p.ForSerial == st.Serial && p.SensorID == st.SensorID && p.Answer != nil:
		// Answered before, but the state was not saved: use that answer
		// (asking anew with the replaced token would be refused).
		return st.renewed(p, *p.Answer)
	case err == nil && p.ForSerial == st.Serial && p.SensorID == st.SensorID:
		// The request sent before, whose answer never arrived.
	case err == nil || errors.Is(err, fs.ErrNotExist):
		if p, err = newPendingRenewal(st); err != nil {
			return nil, err
		}
		if err := dir.saveRenewal(p); err != nil {
			return nil, fmt.Errorf("renew certificate of sensor %s: %w", st.SensorID, err)
		}
	default:
		return nil, err
	}
	next, a, err := e.renew(ctx, st, p)
	var apiErr *APIError
	if errors.As(err, &apiErr) && (apiErr.Status == http.StatusBadRequest || apiErr.Status == http.StatusUnprocessableEntity) {
		_ = dir.ClearRenewal()
	}
	if err != nil {
		return nil, err
	}
	p.Answer = &a
	if err := dir.saveRenewal(p); err != nil {
		return nil, fmt.Errorf("renew certificate of sensor %s: journal the answer: %w", st.SensorID, err)
	}
	return next, nil
}

func (e *Enroller) renew(ctx context.Context, st *State, p *pendingRenewal) (*State, certificateAnswer, error) {
	var a certificateAnswer
	proof, err := possessionProof(st, p.CSR, time.Now())
	if err != nil {
		return nil, a, fmt.Errorf("renew certificate of sensor %s: %w", st.SensorID, err)
	}
	path := "/api/sensors/" + url.PathEscape(st.SensorID) + "/agent/renew"
	if err := e.call(ctx, path, st.SensorToken, agentwire.RenewRequest{CSR: p.CSR, Proof: &proof}, http.StatusOK, &a); err != nil {
		return nil, a, fmt.Errorf("renew certificate of sensor %s: %w", st.SensorID, err)
	}
	if a.CACertificate == "" {
		a.CACertificate = string(st.CAPEM)
	}
	next, err := st.renewed(p, a)
	if err != nil {
		return nil, a, fmt.Errorf("renew certificate of sensor %s: %w", st.SensorID, err)
	}
	return next, a, nil
}

// renewed is st with a renewal's answer applied.
func (s *State) renewed(p *pendingRenewal, a certificateAnswer) (*State, error) {
	key, err := parseKeyPEM([]byte(p.KeyPEM))
	if err != nil {
		return nil, err
	}
	next := s.Clone()
	// The sensor token rotates with every renewal: the old one is revoked.
	if a.SensorToken != "" {
		next.SensorToken = a.SensorToken
	}
	if err := next.setCertificate(key, []byte(p.KeyPEM), a); err != nil {
		return nil, err
	}
	// A renewal carries the sensor's current NATS credentials: new ones
	// when the provisioner replaced a user whose permissions went out of
	// date. A control plane without provisioning sends none: keep ours.
	next.setNATS(a)
	return next, nil
}

// possessionProof signs RenewalMessage for csr with the state's current
// key (ECDSA P-256, SHA-256, ASN.1).
func possessionProof(st *State, csr string, now time.Time) (agentwire.Proof, error) {
	cert, err := st.TLSCertificate()
	if err != nil {
		return agentwire.Proof{}, fmt.Errorf("current certificate: %w", err)
	}
	key, ok := cert.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return agentwire.Proof{}, fmt.Errorf("current key of type %T", cert.PrivateKey)
	}
	now = now.UTC()
	digest := sha256.Sum256(RenewalMessage(st.SensorID, []byte(csr), now))
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		return agentwire.Proof{}, fmt.Errorf("sign renewal: %w", err)
	}
	return agentwire.Proof{Certificate: string(st.CertPEM), SignedAt: now, Signature: base64.StdEncoding.EncodeToString(sig)}, nil
}

// RenewalMessage is what a renewal signs: the sensor, the digest of the CSR
// it sends and the signing time. It must match the control plane's
// fleet.RenewalMessage byte for byte (a test holds them together).
func RenewalMessage(sensorID string, csrPEM []byte, signedAt time.Time) []byte {
	h := sha256.Sum256(csrPEM)
	return []byte("rxc-renew-v1\n" + sensorID + "\n" + hex.EncodeToString(h[:]) + "\n" + signedAt.UTC().Format(time.RFC3339Nano))
}

// setNATS takes the answer's NATS access, when it has one.
func (s *State) setNATS(a certificateAnswer) {
	if a.NATS != nil {
		n := a.NATS.NATSAddress
		s.NATS, s.Creds = &n, []byte(a.NATS.Creds)
	}
}

// setCertificate checks the answer's certificate (our key, chains to the
// CA, client authentication) and stores it with its key.
func (s *State) setCertificate(key *ecdsa.PrivateKey, keyPEM []byte, a certificateAnswer) error {
	leaf, err := parseCertPEM([]byte(a.Certificate))
	if err != nil {
		return fmt.Errorf("certificate: %w", err)
	}
	if !samePublicKey(leaf, key) {
		return fmt.Errorf("certificate: %w", ErrKeyMismatch)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(a.CACertificate)) {
		return errors.New("caCertificate: no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("certificate does not chain to the returned CA: %w", err)
	}
	s.KeyPEM, s.CertPEM, s.CAPEM = keyPEM, []byte(a.Certificate), []byte(a.CACertificate)
	s.Serial, s.NotAfter, s.ObtainedAt = serialHex(leaf), leaf.NotAfter.UTC(), time.Now().UTC()
	return nil
}

func newKeyAndCSR(sensorID string) (*ecdsa.PrivateKey, []byte, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, "", fmt.Errorf("generate key: %w", err)
	}
	return keyAndCSR(key, sensorID)
}

func keyAndCSR(key *ecdsa.PrivateKey, sensorID string) (*ecdsa.PrivateKey, []byte, string, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, "", fmt.Errorf("encode key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: sensorID}}, key)
	if err != nil {
		return nil, nil, "", fmt.Errorf("create CSR: %w", err)
	}
	return key, keyPEM, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER})), nil
}

// call POSTs body as JSON and decodes a want answer into out; any other
// answer becomes an *APIError.
func (e *Enroller) call(ctx context.Context, path, bearer string, body any, want int, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base.JoinPath(path).String(), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", e.ua)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode != want {
		apiErr := &APIError{Status: resp.StatusCode}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			apiErr.RetryAfter = min(time.Duration(secs)*time.Second, maxRetryAfter)
		}
		var p struct{ Code, Title, Detail string }
		if json.Unmarshal(raw, &p) == nil {
			apiErr.Code, apiErr.Title, apiErr.Detail = p.Code, truncate(p.Title, 200), truncate(p.Detail, 500)
		}
		return apiErr
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
