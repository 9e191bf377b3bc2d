package fleet

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/sdk/logkey"
)

// CertificateAuthority signs sensor client certificates. Errors caused by
// the CSR wrap ErrInvalidCSR.
type CertificateAuthority interface {
	SignCSR(req CertRequest) (IssuedCertificate, error)
	CACertificatePEM() []byte
	// VerifyPossession checks that certPEM is a sensor certificate this CA
	// issued, valid at now, and that signature is its key's signature of
	// message; it returns what the certificate names.
	VerifyPossession(certPEM, message, signature []byte, now time.Time) (CertIdentity, error)
	// VerifyCSRPossession checks that csrPEM is a well-formed, self-signed
	// CSR and that signature is its key's signature of message (an
	// enrolment's proof: the agent holds the key it asks a certificate for).
	VerifyCSRPossession(csrPEM, message, signature []byte) error
}

// TokenKind tells the two bearer tokens of a sensor apart.
type TokenKind string

// Token kinds: the single-use enrolment token from a redemption, and the
// long-lived sensor token used for renewal.
const (
	TokenEnrollment TokenKind = "enrollment"
	TokenSensor     TokenKind = "sensor"
)

// Token is a stored bearer token: its hash, never the token.
type Token struct {
	SensorID  string
	Kind      TokenKind
	Hash      []byte
	ExpiresAt time.Time // zero: no expiry
}

// EnrollStore persists enrolment and renewal.
type EnrollStore interface {
	// LiveToken returns the sensor's unused, unrevoked token of that kind,
	// or ErrNotFound.
	LiveToken(ctx context.Context, sensorID string, kind TokenKind) (Token, error)
	// SensorCredential reads at once what checking a sensor's bearer token
	// needs: the sensor, its live token of that kind (as LiveToken; a nil
	// Hash when it has none) and its tenant's NATS status. ErrNotFound
	// for an unknown sensor.
	SensorCredential(ctx context.Context, sensorID string, kind TokenKind) (SensorCredential, error)
	// CompleteEnrollment, in one transaction, consumes the enrolment token
	// (ErrInvalidToken when it was used, revoked or expired meanwhile),
	// refuses revoked sensors (ErrRevoked), makes the certificate the
	// sensor's only active one, replaces its sensor token and records its
	// NATS identity and new state.
	CompleteEnrollment(ctx context.Context, e EnrollmentRecord) error
	// RenewCertificate, in one transaction: refuses revoked sensors
	// (ErrRevoked) and a renewal whose ReplacesSerial is no longer the
	// active certificate (ErrInvalidToken: another renewal won), makes the
	// new certificate the only active one, replaces the sensor token,
	// records a new NATS user when one is named, and prunes superseded
	// certificates but the latest few.
	RenewCertificate(ctx context.Context, r RenewalRecord) error
	// ActiveRenewal returns what the renewal that issued the sensor's
	// active certificate proved, or ErrNotFound when that certificate came
	// from enrolment.
	ActiveRenewal(ctx context.Context, sensorID string) (ActiveRenewal, error)
	// ActiveEnrolment returns what the enrolment that issued the sensor's
	// active certificate was given, with the state of the enrolment token
	// it consumed; ErrNotFound when that certificate came from a renewal,
	// from an enrolment without a proof (an old agent), or its token is no
	// longer on record.
	ActiveEnrolment(ctx context.Context, sensorID string) (ActiveEnrolment, error)
}

// ActiveEnrolment is what the enrolment that issued a sensor's active
// certificate was given: enough to recognise the same request sent again
// by an agent that never received the answer (Enrolment.EnrollProven).
type ActiveEnrolment struct {
	// Serial is the active certificate.
	Serial string
	// TokenHash is the enrolment token it consumed.
	TokenHash []byte
	// CSRSHA256 is the SHA-256 of the CSR it was issued for.
	CSRSHA256 []byte
	// ProvenSignedAt is the signedAt (to the microsecond) of the proof
	// answered last: a request sent again must carry one signed later.
	ProvenSignedAt time.Time
	// TokenExpiresAt is the token's original expiry and TokenRevoked
	// whether it was revoked since it was used.
	TokenExpiresAt time.Time
	TokenRevoked   bool
}

// EnrolmentProof is an agent's proof that it holds the key of the CSR it
// sends for enrolment: a signature by that key over EnrolmentMessage.
type EnrolmentProof struct {
	SignedAt  time.Time
	Signature []byte
}

// EnrolmentMessage is what an agent signs with the key of its CSR to
// enrol: bound to the sensor, the exact CSR and the signing time, so a
// proof cannot serve another sensor or CSR, nor a later re-ask.
func EnrolmentMessage(sensorID string, csrPEM []byte, signedAt time.Time) []byte {
	h := sha256.Sum256(csrPEM)
	return []byte("rxc-enrol-v1\n" + sensorID + "\n" + hex.EncodeToString(h[:]) + "\n" + signedAt.UTC().Format(time.RFC3339Nano))
}

// ActiveRenewal is what the renewal that issued a sensor's active
// certificate was given: enough to recognise the same request sent again
// by an agent that never received the answer.
type ActiveRenewal struct {
	// Serial is the active certificate.
	Serial string
	// CSRSHA256 is the SHA-256 of the CSR it was issued for.
	CSRSHA256 []byte
	// ProvenSerial is the certificate whose key signed the renewal's proof,
	// ProvenTokenHash the sensor token it presented (both now replaced).
	ProvenSerial    string
	ProvenTokenHash []byte
	// ProvenSignedAt is the proof's signedAt (to the microsecond): a
	// request sent again must carry a proof signed later, so a copy of an
	// answered request is refused (zero: recorded before it was kept).
	ProvenSignedAt time.Time
}

// RenewalRecord is what a renewal writes.
type RenewalRecord struct {
	SensorID string
	// ReplacesSerial is the active certificate the renewal replaces: the
	// one whose key it proved or, when an agent asks again for an answer it
	// lost, the one that answer carried.
	ReplacesSerial string
	Certificate    IssuedCertificate
	// CSRSHA256, ProvenSerial, ProvenTokenHash and ProvenSignedAt are kept
	// with the new certificate (see ActiveRenewal).
	CSRSHA256       []byte
	ProvenSerial    string
	ProvenTokenHash []byte
	ProvenSignedAt  time.Time
	// EnrolmentTokenHash, instead of ProvenSerial and ProvenTokenHash,
	// marks the answer to an enrolment sent again (see ActiveEnrolment).
	EnrolmentTokenHash   []byte
	NATS                 NATSUser
	SensorTokenHash      []byte
	SensorTokenExpiresAt time.Time
	At                   time.Time
}

// SensorCredential is a sensor with its live token of one kind and its
// tenant's NATS status (EnrollStore.SensorCredential).
type SensorCredential struct {
	Sensor Sensor
	// Token is the live token; its Hash is nil when there is none.
	Token            Token
	TenantNATSStatus NATSStatus
}

// EnrollmentRecord is what a completed enrolment writes.
type EnrollmentRecord struct {
	SensorID            string
	EnrollmentTokenHash []byte
	Certificate         IssuedCertificate
	SensorTokenHash     []byte
	// SensorTokenExpiresAt is the certificate's expiry: the token renews
	// that certificate and is replaced with each renewal.
	SensorTokenExpiresAt time.Time
	NATSUserPubKey       string
	NATSAccountPubKey    string
	State                State
	At                   time.Time
	// Labels the agent declared; nil leaves the sensor's labels as they are.
	Labels map[string]string
	// CSRSHA256 and ProvenSignedAt, set when the agent proved its CSR's
	// key, are kept with the certificate (see ActiveEnrolment); nil and
	// zero for an agent that sent no proof.
	CSRSHA256      []byte
	ProvenSignedAt time.Time
}

// Enrollment is what an enrolled sensor receives; the HTTP layer adds the
// public NATS and gRPC addresses.
type Enrollment struct {
	SensorID         string
	TenantID         string
	Certificate      IssuedCertificate
	CACertificatePEM []byte
	SensorToken      string
	// NATS is nil when NATS provisioning is disabled.
	NATS *NATSCredentials
}

// Enroll exchanges a redemption's enrolment token and a CSR for a client
// certificate, NATS credentials and a sensor token. The token is checked
// first, but consumed only together with storing the result: a bad CSR or an
// unreachable provisioner leaves it usable for a retry, and of two racing
// calls only one stores anything. The sensor is "offline" afterwards and
// turns "online" with its first status report or health check.
func (s *Enrolment) Enroll(ctx context.Context, sensorID, enrollmentToken string, csrPEM []byte) (Enrollment, error) {
	return s.EnrollLabeled(ctx, sensorID, enrollmentToken, csrPEM, nil)
}

// EnrollLabeled is Enroll with the labels the agent declares (nil: none
// declared). Labels outside ValidateLabels are refused before the token is
// looked at, so the token stays usable.
func (s *Enrolment) EnrollLabeled(ctx context.Context, sensorID, enrollmentToken string, csrPEM []byte, labels map[string]string) (Enrollment, error) {
	return s.EnrollProven(ctx, sensorID, enrollmentToken, csrPEM, labels, nil)
}

// EnrollProven is EnrollLabeled with the agent's proof that it holds the
// key of its CSR (nil: an old agent sent none). A proof that does not
// verify is ErrInvalidProof and leaves the token usable; so is one sent
// again signed more than a few minutes from the server's clock.
//
// An enrolment made with a proof keeps the CSR's digest and the proof's
// signing time with the certificate. An agent whose answer was lost after
// it was committed holds a used token; it may send the same request again:
// the same token and CSR with a fresh proof by the CSR's key. That is
// answered again (see enrolmentResumable): a new certificate for the same
// CSR supersedes the undelivered one, the sensor token is replaced and the
// NATS credentials are handed out again, so a lost answer never strands a
// sensor. A copy of an answered request (a proof not signed later than the
// one answered) is ErrConflict; anything else with a used token stays
// ErrInvalidToken, and old agents get no second answer.
func (s *Enrolment) EnrollProven(ctx context.Context, sensorID, enrollmentToken string, csrPEM []byte, labels map[string]string, proof *EnrolmentProof) (Enrollment, error) {
	if err := ValidateLabels(labels); err != nil {
		return Enrollment{}, err
	}
	cred, err := s.authenticate(ctx, sensorID, enrollmentToken, TokenEnrollment)
	var lost *ActiveEnrolment
	if errors.Is(err, ErrInvalidToken) && proof != nil {
		cred.Sensor, lost, err = s.enrolmentResumable(ctx, sensorID, enrollmentToken, csrPEM)
	}
	if err != nil {
		return Enrollment{}, err
	}
	sensor := cred.Sensor
	now := s.now()
	var signedAt time.Time
	if proof != nil {
		signedAt = proof.SignedAt.UTC().Truncate(time.Microsecond)
		// The clock bounds only a request sent again: a first enrolment's
		// token is single-use anyway, and a sensor's clock is often not
		// set yet then (an agent without a proof enrols whatever its clock).
		if d := now.Sub(proof.SignedAt); lost != nil && (d > maxProofAge || d < -maxProofAge) {
			return Enrollment{}, fmt.Errorf("%w: signed at %s, more than %s from the server's clock", ErrInvalidProof, proof.SignedAt.UTC().Format(time.RFC3339), maxProofAge)
		}
		if err := s.ca.VerifyCSRPossession(csrPEM, EnrolmentMessage(sensorID, csrPEM, proof.SignedAt), proof.Signature); err != nil {
			return Enrollment{}, fmt.Errorf("%w: %w", ErrInvalidProof, err)
		}
		if lost != nil && !signedAt.After(lost.ProvenSignedAt) {
			// A copy of a request already answered (the agent signs each
			// attempt afresh): whoever saw it must not get its answer.
			return Enrollment{}, fmt.Errorf("%w: the proof was signed at %s, not after the one already answered (a copy of that request, or the sensor's clock went back); sign it again later", ErrConflict, proof.SignedAt.UTC().Format(time.RFC3339Nano))
		}
	}
	if lost == nil && s.provisioning && cred.TenantNATSStatus != NATSProvisioned {
		return Enrollment{}, fmt.Errorf("enrol sensor %s: %w", sensorID, ErrTenantNotProvisioned)
	}
	cert, err := s.sign(sensor, csrPEM)
	if err != nil {
		return Enrollment{}, err
	}
	var creds *NATSCredentials
	if s.provisioning {
		c, err := s.provisioner.EnsureSensorUser(ctx, sensor.TenantID, sensor.ID)
		if err != nil {
			return Enrollment{}, fmt.Errorf("enrol sensor %s: nats user: %w", sensorID, provisionerFailure(err))
		}
		creds = &c
	}
	token, tokenHash, err := newToken()
	if err != nil {
		return Enrollment{}, err
	}
	csrHash := sha256.Sum256(csrPEM)
	if lost != nil {
		if err := s.answerAgain(ctx, sensor, lost, cert, csrHash[:], signedAt, creds, tokenHash, now); err != nil {
			return Enrollment{}, err
		}
	} else {
		rec := EnrollmentRecord{
			SensorID: sensor.ID, EnrollmentTokenHash: hashToken(enrollmentToken), Certificate: cert,
			SensorTokenHash: tokenHash, SensorTokenExpiresAt: cert.NotAfter, State: StateOffline, At: now,
			Labels: labels,
		}
		if proof != nil {
			rec.CSRSHA256, rec.ProvenSignedAt = csrHash[:], signedAt
		}
		if creds != nil {
			rec.NATSUserPubKey, rec.NATSAccountPubKey = creds.UserPubKey, creds.AccountPubKey
		}
		if err := s.store.CompleteEnrollment(ctx, rec); err != nil {
			if errors.Is(err, ErrRevoked) && creds != nil {
				// Revoked while enrolling: the revocation saw no NATS user yet,
				// so the one just created must not outlive this call.
				if rerr := s.provisioner.RevokeUser(ctx, creds.AccountPubKey, creds.UserPubKey); rerr != nil {
					s.log.ErrorContext(ctx, "revoke nats user of a sensor revoked during enrolment", logkey.Sensor, sensorID, "user", creds.UserPubKey, logkey.Error, rerr)
				}
			}
			return Enrollment{}, fmt.Errorf("enrol sensor %s: %w", sensorID, err)
		}
		s.log.InfoContext(ctx, "sensor enrolled", logkey.Tenant, sensor.TenantID, logkey.Sensor, sensor.ID, "serial", cert.Serial)
	}
	return Enrollment{
		SensorID: sensor.ID, TenantID: sensor.TenantID, Certificate: cert,
		CACertificatePEM: s.ca.CACertificatePEM(), SensorToken: token, NATS: creds,
	}, nil
}

// answerAgain stores the answer to an enrolment sent again: cert replaces
// the undelivered certificate lost.Serial (in one transaction that refuses
// when the active certificate moved meanwhile: of two racing re-asks one
// wins), the sensor token is replaced and a new NATS user is recorded when
// the provisioner minted one.
func (s *Enrolment) answerAgain(ctx context.Context, sensor Sensor, lost *ActiveEnrolment, cert IssuedCertificate, csrHash []byte, signedAt time.Time, creds *NATSCredentials, tokenHash []byte, now time.Time) error {
	var user NATSUser
	if creds != nil && creds.UserPubKey != sensor.NATSUserPubKey {
		user = NATSUser{AccountPubKey: creds.AccountPubKey, UserPubKey: creds.UserPubKey}
	}
	rec := RenewalRecord{
		SensorID: sensor.ID, ReplacesSerial: lost.Serial, Certificate: cert, NATS: user,
		CSRSHA256: csrHash, ProvenSignedAt: signedAt, EnrolmentTokenHash: lost.TokenHash,
		SensorTokenHash: tokenHash, SensorTokenExpiresAt: cert.NotAfter, At: now,
	}
	if err := s.store.RenewCertificate(ctx, rec); err != nil {
		if errors.Is(err, ErrRevoked) && user.UserPubKey != "" {
			if rerr := s.provisioner.RevokeUser(ctx, user.AccountPubKey, user.UserPubKey); rerr != nil {
				s.log.ErrorContext(ctx, "revoke nats user of a sensor revoked during enrolment", logkey.Sensor, sensor.ID, "user", user.UserPubKey, logkey.Error, rerr)
			}
		}
		return fmt.Errorf("enrol sensor %s again: %w", sensor.ID, err)
	}
	s.log.InfoContext(ctx, "sensor enrolment answered again", logkey.Tenant, sensor.TenantID, logkey.Sensor, sensor.ID,
		"serial", cert.Serial, "replaces", lost.Serial, "new_nats_user", user.UserPubKey != "")
	return nil
}

// enrolmentResumable recognises an enrolment sent again because its answer
// was lost: the sensor's active certificate came from the enrolment that
// used this token (no renewal since), the token was not revoked and its
// original expiry has not passed, and the CSR is byte for byte the one
// that enrolment certified (the caller then checks the proof by the CSR's
// key). Anything else is ErrInvalidToken, as before; a revoked sensor is
// ErrRevoked. The returned sensor is the live one.
func (s *Enrolment) enrolmentResumable(ctx context.Context, sensorID, token string, csrPEM []byte) (Sensor, *ActiveEnrolment, error) {
	return lostAnswer(ctx, s, sensorID, s.store.ActiveEnrolment, func(sensor Sensor, last ActiveEnrolment) bool {
		csr := sha256.Sum256(csrPEM) // taken whatever the record says, as before the refactor
		return last.Serial == sensor.Certificate.Serial && !last.TokenRevoked && s.now().Before(last.TokenExpiresAt) &&
			tokenMatches(token, last.TokenHash) && sameCSR(csr, last.CSRSHA256)
	})
}

// lostAnswer reads the live sensor (liveSensor's refusals) and the record
// read keeps of the answer it may have lost, and returns both when
// matches recognises the request in that record. No record, or one that
// does not match, is ErrInvalidToken.
func lostAnswer[R any](ctx context.Context, s *Enrolment, sensorID string, read func(context.Context, string) (R, error), matches func(Sensor, R) bool) (Sensor, *R, error) {
	sensor, err := s.liveSensor(ctx, sensorID)
	if err != nil {
		return Sensor{}, nil, err
	}
	last, err := read(ctx, sensorID)
	if errIsNotFound(err) {
		return Sensor{}, nil, ErrInvalidToken
	}
	if err != nil {
		return Sensor{}, nil, err
	}
	if !matches(sensor, last) {
		return Sensor{}, nil, ErrInvalidToken
	}
	return sensor, &last, nil
}

// sameCSR reports, in constant time, whether h (the SHA-256 of the CSR a
// request carries) is the digest a record keeps. The callers hash the CSR
// before the token check, so that whether the token matched does not change
// how long the check takes (the hash of a CSR of up to the body limit is the
// slow part).
func sameCSR(h [sha256.Size]byte, sum []byte) bool {
	return subtle.ConstantTimeCompare(h[:], sum) == 1
}

// NATSUser names a sensor's NATS user; the zero value names none.
type NATSUser struct {
	AccountPubKey, UserPubKey string
}

// Renewal is what a renewal hands back: the new certificate, the sensor
// token that renews it (the old one is revoked) and, with provisioning on,
// the sensor's current NATS credentials.
type Renewal struct {
	Certificate IssuedCertificate
	SensorToken string
	NATS        *NATSCredentials
}

// PossessionProof is a sensor's proof that it holds the key of its current
// certificate: that certificate and a signature by its key over
// RenewalMessage.
type PossessionProof struct {
	CertificatePEM []byte
	SignedAt       time.Time
	Signature      []byte
}

// CertIdentity is what a verified sensor certificate names.
type CertIdentity struct {
	TenantID, SensorID string
	// Serial in lower-case hex.
	Serial string
}

// Renewal bounds.
const (
	// DefaultMinRenewInterval is the least time between two renewals of a
	// sensor (Config.MinRenewInterval).
	DefaultMinRenewInterval = time.Minute
	// maxProofAge bounds how far a proof's signing time may lie from now.
	maxProofAge = 5 * time.Minute
)

// RenewalMessage is what a sensor signs with the key of its current
// certificate to renew it: bound to the sensor, the exact CSR it sends and
// the signing time, so a proof cannot be used for another sensor or CSR,
// nor kept for later.
func RenewalMessage(sensorID string, csrPEM []byte, signedAt time.Time) []byte {
	h := sha256.Sum256(csrPEM)
	return []byte("rxc-renew-v1\n" + sensorID + "\n" + hex.EncodeToString(h[:]) + "\n" + signedAt.UTC().Format(time.RFC3339Nano))
}

// Renew exchanges a CSR for a new certificate, whose serial replaces the
// sensor's current one. It needs the sensor token and a proof of possession
// of the current certificate's key (a stolen token alone renews nothing);
// old agents that send no proof get ErrAgentUpgradeRequired. Renewals are
// at most one per Config.MinRenewInterval per sensor (ErrRateLimited), and of two
// racing renewals one wins. The sensor token is replaced. With provisioning
// on it also returns the sensor's NATS credentials: the provisioner hands
// back the active user, or mints a new one when the old was revoked because
// its permissions went out of date (an upgrade); the new user is recorded
// so a later revocation of the sensor reaches it.
//
// An agent whose renewal answer was lost after it was committed still holds
// the replaced token and certificate. It may send the same request again:
// the same CSR, with the token and a fresh proof by the key that renewal
// proved. That is answered as a renewal of the certificate it never
// received (see resumable), exempt from the rate limit, so a lost answer
// never strands a sensor.
func (s *Enrolment) Renew(ctx context.Context, sensorID, sensorToken string, csrPEM []byte, proof *PossessionProof) (Renewal, error) {
	cred, err := s.authenticate(ctx, sensorID, sensorToken, TokenSensor)
	sensor := cred.Sensor
	var lost *ActiveRenewal
	if errors.Is(err, ErrInvalidToken) {
		sensor, lost, err = s.resumable(ctx, sensorID, sensorToken, csrPEM)
	}
	if err != nil {
		return Renewal{}, err
	}
	if proof == nil {
		return Renewal{}, ErrAgentUpgradeRequired
	}
	now := s.now()
	if d := now.Sub(proof.SignedAt); d > maxProofAge || d < -maxProofAge {
		return Renewal{}, fmt.Errorf("%w: signed at %s, more than %s from the server's clock", ErrInvalidProof, proof.SignedAt.UTC().Format(time.RFC3339), maxProofAge)
	}
	id, err := s.ca.VerifyPossession(proof.CertificatePEM, RenewalMessage(sensorID, csrPEM, proof.SignedAt), proof.Signature, now)
	if err != nil {
		return Renewal{}, fmt.Errorf("%w: %w", ErrInvalidProof, err)
	}
	switch {
	case id.TenantID != sensor.TenantID || id.SensorID != sensor.ID:
		return Renewal{}, fmt.Errorf("%w: the certificate is not the sensor's", ErrInvalidProof)
	case lost != nil && id.Serial != lost.ProvenSerial:
		// Not the request sent again: the replaced token is just wrong.
		return Renewal{}, ErrInvalidToken
	case lost != nil && !proof.SignedAt.UTC().Truncate(time.Microsecond).After(lost.ProvenSignedAt):
		// A copy of a request already answered (the agent signs each
		// attempt afresh): whoever saw the request must not get its answer.
		// A conflict, not a refusal of the sensor: an agent whose clock
		// went back retries (agents take 401 and 403 for a revocation) and
		// is answered once its clock passes the proof already answered.
		return Renewal{}, fmt.Errorf("%w: the proof was signed at %s, not after the one already answered (a copy of that request, or the sensor's clock went back); sign it again later", ErrConflict, proof.SignedAt.UTC().Format(time.RFC3339Nano))
	case lost == nil && id.Serial != sensor.Certificate.Serial:
		return Renewal{}, fmt.Errorf("%w: the certificate is not the sensor's active one", ErrInvalidProof)
	}
	if next := sensor.Certificate.IssuedAt.Add(s.minRenew); lost == nil && now.Before(next) {
		return Renewal{}, &RateLimitError{RetryAfter: next.Sub(now)}
	}
	cert, err := s.sign(sensor, csrPEM)
	if err != nil {
		return Renewal{}, err
	}
	var (
		creds *NATSCredentials
		user  NATSUser
	)
	if s.provisioning {
		c, err := s.provisioner.EnsureSensorUser(ctx, sensor.TenantID, sensor.ID)
		if err != nil {
			return Renewal{}, fmt.Errorf("renew sensor %s: nats user: %w", sensorID, provisionerFailure(err))
		}
		creds = &c
		if c.UserPubKey != sensor.NATSUserPubKey {
			user = NATSUser{AccountPubKey: c.AccountPubKey, UserPubKey: c.UserPubKey}
		}
	}
	token, tokenHash, err := newToken()
	if err != nil {
		return Renewal{}, err
	}
	csrHash := sha256.Sum256(csrPEM)
	rec := RenewalRecord{
		SensorID: sensor.ID, ReplacesSerial: sensor.Certificate.Serial, Certificate: cert, NATS: user,
		CSRSHA256: csrHash[:], ProvenSerial: id.Serial, ProvenTokenHash: hashToken(sensorToken),
		ProvenSignedAt:  proof.SignedAt.UTC().Truncate(time.Microsecond),
		SensorTokenHash: tokenHash, SensorTokenExpiresAt: cert.NotAfter, At: now,
	}
	if err := s.store.RenewCertificate(ctx, rec); err != nil {
		if errors.Is(err, ErrRevoked) && user.UserPubKey != "" {
			// Revoked while renewing: the revocation revoked the old user,
			// so the one just minted must not outlive this call.
			if rerr := s.provisioner.RevokeUser(ctx, user.AccountPubKey, user.UserPubKey); rerr != nil {
				s.log.ErrorContext(ctx, "revoke nats user of a sensor revoked during renewal", logkey.Sensor, sensorID, "user", user.UserPubKey, logkey.Error, rerr)
			}
		}
		return Renewal{}, fmt.Errorf("renew sensor %s: %w", sensorID, err)
	}
	s.log.InfoContext(ctx, "sensor certificate renewed", logkey.Tenant, sensor.TenantID, logkey.Sensor, sensor.ID, "serial", cert.Serial, "new_nats_user", user.UserPubKey != "", "lost_answer_resent", lost != nil)
	return Renewal{Certificate: cert, SensorToken: token, NATS: creds}, nil
}

// resumable recognises a renewal sent again because its answer was lost:
// the token is the one the renewal of the active certificate replaced and
// the CSR is byte for byte the one that renewal certified (the caller then
// checks the proof is by the key it proved). Anything else is
// ErrInvalidToken, as before. The returned sensor is the live one.
func (s *Enrolment) resumable(ctx context.Context, sensorID, token string, csrPEM []byte) (Sensor, *ActiveRenewal, error) {
	return lostAnswer(ctx, s, sensorID, s.store.ActiveRenewal, func(sensor Sensor, last ActiveRenewal) bool {
		csr := sha256.Sum256(csrPEM) // taken whatever the record says, as before the refactor
		return last.Serial == sensor.Certificate.Serial && tokenMatches(token, last.ProvenTokenHash) && sameCSR(csr, last.CSRSHA256)
	})
}

// authenticate checks a sensor's bearer token of the given kind, reading
// the sensor, its token and its tenant's NATS status at once. Malformed and
// unknown sensor ids and wrong, used or expired tokens all give
// ErrInvalidToken; a revoked sensor gives ErrRevoked, whatever the token.
func (s *Enrolment) authenticate(ctx context.Context, sensorID, token string, kind TokenKind) (SensorCredential, error) {
	if ids.Validate(sensorID) != nil {
		return SensorCredential{}, ErrInvalidToken
	}
	cred, err := s.store.SensorCredential(ctx, sensorID, kind)
	if errIsNotFound(err) {
		return SensorCredential{}, ErrInvalidToken
	}
	if err != nil {
		return SensorCredential{}, err
	}
	if cred.Sensor.State == StateRevoked {
		return SensorCredential{}, fmt.Errorf("sensor %s: %w", sensorID, ErrRevoked)
	}
	stored := cred.Token
	if stored.Hash == nil || !tokenMatches(token, stored.Hash) || !stored.ExpiresAt.IsZero() && !s.now().Before(stored.ExpiresAt) {
		return SensorCredential{}, ErrInvalidToken
	}
	return cred, nil
}

// liveSensor reads a sensor a credential names: malformed and unknown ids
// are ErrInvalidToken (a caller learns nothing about which ids exist), a
// revoked sensor ErrRevoked.
func (s *Enrolment) liveSensor(ctx context.Context, sensorID string) (Sensor, error) {
	if ids.Validate(sensorID) != nil {
		return Sensor{}, ErrInvalidToken
	}
	sensor, err := s.store.Sensor(ctx, sensorID)
	if errIsNotFound(err) {
		return Sensor{}, ErrInvalidToken
	}
	if err != nil {
		return Sensor{}, err
	}
	if sensor.State == StateRevoked {
		return Sensor{}, fmt.Errorf("sensor %s: %w", sensorID, ErrRevoked)
	}
	return sensor, nil
}

func (s *Enrolment) sign(sensor Sensor, csrPEM []byte) (IssuedCertificate, error) {
	if len(csrPEM) == 0 {
		return IssuedCertificate{}, fmt.Errorf("%w: empty", ErrInvalidCSR)
	}
	cert, err := s.ca.SignCSR(CertRequest{CSRPEM: csrPEM, TenantID: sensor.TenantID, SensorID: sensor.ID, TTL: s.certTTL})
	if err != nil {
		return IssuedCertificate{}, fmt.Errorf("sign certificate for sensor %s: %w", sensor.ID, err)
	}
	cert.Serial = strings.ToLower(cert.Serial)
	if cert.Serial == "" {
		return IssuedCertificate{}, errors.New("sign certificate: CA returned no serial")
	}
	cert.NotBefore = cert.NotBefore.UTC().Truncate(time.Microsecond)
	cert.NotAfter = cert.NotAfter.UTC().Truncate(time.Microsecond)
	return cert, nil
}

// provisionerFailure gives a provisioner error the one meaning the caller
// acts on: disabled and tenant-not-provisioned pass as they are; anything
// else becomes ErrProvisionerUnavailable, keeping the cause's text but not
// its sentinels, so a refusal such as "account not found" cannot read as "no
// such sensor".
func provisionerFailure(err error) error {
	if errors.Is(err, ErrProvisionerUnavailable) || errors.Is(err, ErrProvisionerDisabled) || errors.Is(err, ErrTenantNotProvisioned) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrProvisionerUnavailable, err)
}
