package fleettest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rxc-project/rxc/core/clocktest"
	"github.com/rxc-project/rxc/core/fleet"
	"github.com/rxc-project/rxc/core/topology"
)

// The fakes below stand in for the fleet ports that are not stores: the
// provisioner client, the certificate authority, the NATS command publisher
// and the gRPC session registry. They record their calls so tests can
// assert what a use case asked of them, and can be told to fail. The
// stores' stand-in is the in-memory adapter (adapters/memory/fleetmem),
// which passes the same contract suite as the PostgreSQL store.

// Clock is a controllable time source; pass its Now as fleet.Config.Clock.
type Clock = clocktest.Clock

// NewClock returns a Clock standing at t.
func NewClock(t time.Time) *Clock { return clocktest.New(t) }

// Provisioner is a fleet.Provisioner that mints predictable keys: tenant t
// gets account "A-t", sensor s user "U-s" and creds "creds of s" (plus
// UserGen), with the topology's stream, consumer and subjects.
type Provisioner struct {
	mu          sync.Mutex
	calls       []string
	revocations [][2]string
	// AccountErr, UserErr and RevokeErr, when set, fail the calls.
	AccountErr, UserErr, RevokeErr error
	// UserGen is appended to minted user keys: change it to make the next
	// EnsureSensorUser hand out a new user (as after an upgrade revoked the
	// old one).
	UserGen string
}

func (p *Provisioner) record(call string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, call)
}

// Calls lists the calls made, in order ("EnsureAccount t",
// "EnsureSensorUser t s", "RevokeUser A U").
func (p *Provisioner) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// Revocations lists the (account, user) pairs revoked successfully.
func (p *Provisioner) Revocations() [][2]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][2]string(nil), p.revocations...)
}

// Fail sets the errors of the three calls at once (nil clears them).
func (p *Provisioner) Fail(account, user, revoke error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.AccountErr, p.UserErr, p.RevokeErr = account, user, revoke
}

// EnsureAccount implements fleet.Provisioner.
func (p *Provisioner) EnsureAccount(_ context.Context, tenantID, _ string) (string, error) {
	p.record("EnsureAccount " + tenantID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.AccountErr != nil {
		return "", p.AccountErr
	}
	return "A-" + tenantID, nil
}

// EnsureSensorUser implements fleet.Provisioner.
func (p *Provisioner) EnsureSensorUser(_ context.Context, tenantID, sensorID string) (fleet.NATSCredentials, error) {
	p.record("EnsureSensorUser " + tenantID + " " + sensorID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.UserErr != nil {
		return fleet.NATSCredentials{}, p.UserErr
	}
	s := topology.Sensor{Stream: topology.DefaultStream, TenantID: tenantID, SensorID: sensorID}
	return fleet.NATSCredentials{
		AccountPubKey: "A-" + tenantID, UserPubKey: "U-" + sensorID + p.UserGen, Creds: "creds of " + sensorID + p.UserGen,
		Stream: s.Stream, Consumer: s.Consumer(), JSAPIPrefix: topology.APIPrefix, InboxPrefix: s.InboxPrefix(),
		CommandSubject: s.CommandSubject(), StatusSubject: s.StatusSubject(),
	}, nil
}

// RevokeUser implements fleet.Provisioner.
func (p *Provisioner) RevokeUser(_ context.Context, accountPubKey, userPubKey string) error {
	p.record("RevokeUser " + accountPubKey + " " + userPubKey)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.RevokeErr != nil {
		return p.RevokeErr
	}
	p.revocations = append(p.revocations, [2]string{accountPubKey, userPubKey})
	return nil
}

// CA is a fleet.CertificateAuthority whose "certificates" are the text
// "<tenant> <sensor> <serial>" and whose serials count up. The CSR "bad
// csr" is refused as ErrInvalidCSR.
type CA struct {
	mu       sync.Mutex
	clock    func() time.Time
	serial   int
	requests []fleet.CertRequest
	// OnSign, when set, runs inside SignCSR: a hook to interleave events.
	OnSign func(fleet.CertRequest)
}

// NewCA returns a CA that dates certificates by clock.
func NewCA(clock func() time.Time) *CA { return &CA{clock: clock} }

// SignCSR implements fleet.CertificateAuthority.
func (c *CA) SignCSR(req fleet.CertRequest) (fleet.IssuedCertificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if string(req.CSRPEM) == "bad csr" {
		return fleet.IssuedCertificate{}, fmt.Errorf("parse: %w", fleet.ErrInvalidCSR)
	}
	if c.OnSign != nil {
		c.OnSign(req)
	}
	c.requests = append(c.requests, req)
	c.serial++
	now := c.clock()
	return fleet.IssuedCertificate{
		CertificatePEM: []byte(req.TenantID + " " + req.SensorID + " " + strings.ToLower(fmt.Sprintf("%032X", c.serial))),
		Serial:         fmt.Sprintf("%032X", c.serial),
		NotBefore:      now.Add(-time.Minute), NotAfter: now.Add(req.TTL),
	}, nil
}

// Requests lists the requests signed, in order.
func (c *CA) Requests() []fleet.CertRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]fleet.CertRequest(nil), c.requests...)
}

// CACertificatePEM implements fleet.CertificateAuthority.
func (c *CA) CACertificatePEM() []byte { return []byte("ca pem") }

// VerifyPossession implements fleet.CertificateAuthority: it accepts a
// certificate this CA issued and the signature Sign makes with its serial.
func (c *CA) VerifyPossession(certPEM, message, signature []byte, _ time.Time) (fleet.CertIdentity, error) {
	parts := strings.Fields(string(certPEM))
	if len(parts) != 3 {
		return fleet.CertIdentity{}, errors.New("not a certificate of this CA")
	}
	if string(signature) != Sign(parts[2], message) {
		return fleet.CertIdentity{}, errors.New("bad signature")
	}
	return fleet.CertIdentity{TenantID: parts[0], SensorID: parts[1], Serial: parts[2]}, nil
}

// VerifyCSRPossession implements fleet.CertificateAuthority: it accepts
// the signature CSRSign makes for csrPEM.
func (c *CA) VerifyCSRPossession(csrPEM, message, signature []byte) error {
	if len(csrPEM) == 0 {
		return errors.New("empty CSR")
	}
	if string(signature) != CSRSign(csrPEM, message) {
		return errors.New("bad signature")
	}
	return nil
}

// CSRSign is the fake CA's "signature" of message by the key of csrPEM.
func CSRSign(csrPEM, message []byte) string {
	return Sign("csr:"+string(csrPEM), message)
}

// EnrolProof is a proof of possession of csr's key for sensorID's
// enrolment, signed at at.
func EnrolProof(sensorID string, csr []byte, at time.Time) *fleet.EnrolmentProof {
	return &fleet.EnrolmentProof{SignedAt: at, Signature: []byte(CSRSign(csr, fleet.EnrolmentMessage(sensorID, csr, at)))}
}

// Sign is the fake CA's "signature" of message by the key of serial.
func Sign(serial string, message []byte) string {
	h := sha256.Sum256(append([]byte(serial+"|"), message...))
	return hex.EncodeToString(h[:])
}

// Proof is a proof of possession of certPEM's key (a certificate of CA)
// for sensorID's renewal with csr, signed at at.
func Proof(certPEM []byte, sensorID string, csr []byte, at time.Time) *fleet.PossessionProof {
	serial := strings.Fields(string(certPEM))[2]
	return &fleet.PossessionProof{CertificatePEM: certPEM, SignedAt: at, Signature: []byte(Sign(serial, fleet.RenewalMessage(sensorID, csr, at)))}
}

// Published is one command the Publisher accepted.
type Published = fleet.Command

// Publisher is a fleet.CommandPublisher that keeps what it is given; its
// sequence numbers count the messages accepted.
type Publisher struct {
	mu     sync.Mutex
	err    error
	failIf func(msgID string) error
	msgs   []Published
}

// FailIf makes a publication fail with what fail returns for its message
// id (the command id); nil from it, or a nil fail, lets it through.
func (p *Publisher) FailIf(fail func(msgID string) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failIf = fail
}

// Fail makes every later publication fail with err (nil: succeed again).
func (p *Publisher) Fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// Messages lists the messages accepted, in order.
func (p *Publisher) Messages() []Published {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Published(nil), p.msgs...)
}

// PublishCommand implements fleet.CommandPublisher.
func (p *Publisher) PublishCommand(_ context.Context, m fleet.Command) (fleet.PublishAck, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return fleet.PublishAck{}, p.err
	}
	if p.failIf != nil {
		if err := p.failIf(m.ID); err != nil {
			return fleet.PublishAck{}, err
		}
	}
	p.msgs = append(p.msgs, m)
	return fleet.PublishAck{Sequence: uint64(len(p.msgs))}, nil
}

// Terminator is a fleet.SessionTerminator that records "tenant/sensor".
type Terminator struct {
	mu    sync.Mutex
	calls []string
}

// Terminate implements fleet.SessionTerminator.
func (f *Terminator) Terminate(tenantID, sensorID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, tenantID+"/"+sensorID)
}

// Calls lists the sessions ended, as "tenant/sensor".
func (f *Terminator) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// CountingLocker wraps a Locker and counts TryLock calls.
type CountingLocker struct {
	fleet.Locker
	mu sync.Mutex
	n  int
}

// TryLock implements fleet.Locker.
func (l *CountingLocker) TryLock(ctx context.Context, name string) (func(), bool, error) {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return l.Locker.TryLock(ctx, name)
}

// Attempts is how many TryLock calls were made.
func (l *CountingLocker) Attempts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
