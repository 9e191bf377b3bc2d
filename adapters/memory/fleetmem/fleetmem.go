// Package fleetmem is an in-memory implementation of the fleet store ports
// and Locker, for tests and local experiments. It passes the same contract
// suite (core/fleet/fleettest) as the PostgreSQL store; one mutex makes every
// method atomic, which is what the PostgreSQL store's transactions give.
package fleetmem

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rxc-project/rxc/adapters/memory/hashed"
	"github.com/rxc-project/rxc/adapters/memory/locked"
	"github.com/rxc-project/rxc/core/fleet"
)

// Config is empty; it exists for the usual New(Config) shape.
type Config struct{}

type sensor struct {
	fleet.Sensor
	lastStatusAt  time.Time
	revokedAt     time.Time
	lastCommandID string
	// namedCommandID is the last command to this sensor alone (the
	// PostgreSQL store's sensors.last_command_id): kept by history
	// retention like the last command.
	namedCommandID string
}

type claim struct {
	fleet.ClaimCode
	hash []byte
}

type cert struct {
	serial   string
	sensorID string
	active   bool
	notAfter time.Time
	issuedAt time.Time
	// renewal is what the renewal that issued it proved (nil: enrolment).
	renewal *fleet.ActiveRenewal
	// enrolment is what the enrolment (or its answer sent again) that
	// issued it was given, when the agent proved its CSR's key.
	enrolment *fleet.ActiveEnrolment
}

type token struct {
	fleet.Token
	used, revoked bool
	// usedAt and revokedAt are when (the first time) it was used or
	// revoked: history retention deletes ended tokens by them.
	usedAt, revokedAt time.Time
}

// end marks t revoked at at unless it already ended so.
func (t *token) end(at time.Time) {
	if !t.revoked {
		t.revoked, t.revokedAt = true, at
	}
}

// Store keeps everything in maps guarded by one mutex.
type Store struct {
	mu       sync.Mutex
	tenants  map[string]fleet.Tenant
	deleted  map[string]bool // tenants deleted
	claims   map[string]*claim
	sensors  map[string]*sensor
	certs    map[string]*cert
	tokens   []*token
	commands map[string]*fleet.Command
	batches  map[string]*fleet.Batch
	locks    map[string]bool
}

// New returns an empty Store.
func New(Config) (*Store, error) {
	return &Store{
		tenants: map[string]fleet.Tenant{}, deleted: map[string]bool{}, claims: map[string]*claim{}, sensors: map[string]*sensor{},
		certs: map[string]*cert{}, commands: map[string]*fleet.Command{}, batches: map[string]*fleet.Batch{}, locks: map[string]bool{},
	}, nil
}

var (
	_ fleet.Store  = (*Store)(nil)
	_ fleet.Locker = (*Store)(nil)
)

// CreateTenant implements fleet.TenantStore.
func (s *Store) CreateTenant(_ context.Context, t fleet.Tenant) (fleet.Tenant, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deleted[t.ID] {
		return fleet.Tenant{}, false, fleet.ErrConflict
	}
	if old, ok := s.tenants[t.ID]; ok {
		return old, false, nil
	}
	s.tenants[t.ID] = t
	return t, true, nil
}

// Tenant implements fleet.TenantStore.
func (s *Store) Tenant(_ context.Context, id string) (fleet.Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tenants[id]
	if !ok || s.deleted[id] {
		return fleet.Tenant{}, fleet.ErrNotFound
	}
	return t, nil
}

// DeleteTenant implements fleet.TenantStore.
func (s *Store) DeleteTenant(_ context.Context, id, _ string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tenants[id]; !ok || s.deleted[id] {
		return fleet.ErrNotFound
	}
	live := 0
	for _, sn := range s.sensors {
		if sn.TenantID == id && sn.DecommissionedAt.IsZero() {
			live++
		}
	}
	if live > 0 {
		return &fleet.TenantHasSensorsError{Live: live}
	}
	for _, c := range s.claims {
		if c.TenantID == id && c.UsedAt.IsZero() && c.RevokedAt.IsZero() {
			c.RevokedAt = at
		}
	}
	s.deleted[id] = true
	return nil
}

// ListTenants implements fleet.TenantStore.
func (s *Store) ListTenants(context.Context) ([]fleet.Tenant, error) {
	return s.listTenants(func(fleet.Tenant) bool { return true }), nil
}

// PendingTenants implements fleet.TenantProvisioningStore.
func (s *Store) PendingTenants(context.Context) ([]fleet.Tenant, error) {
	return s.listTenants(func(t fleet.Tenant) bool { return t.NATSStatus == fleet.NATSPending }), nil
}

func (s *Store) listTenants(keep func(fleet.Tenant) bool) []fleet.Tenant {
	return locked.List(&s.mu, s.tenants, func(t fleet.Tenant) bool { return keep(t) && !s.deleted[t.ID] },
		func(t fleet.Tenant) fleet.Tenant { return t },
		locked.OldestFirst(func(t fleet.Tenant) time.Time { return t.CreatedAt }, func(t fleet.Tenant) string { return t.ID }))
}

// SetTenantAccount implements fleet.TenantProvisioningStore.
func (s *Store) SetTenantAccount(_ context.Context, tenantID, accountPubKey string) error {
	return locked.Update(&s.mu, s.tenants, tenantID, fleet.ErrNotFound, func(t fleet.Tenant) error {
		t.NATSAccountPubKey, t.NATSStatus = accountPubKey, fleet.NATSProvisioned
		s.tenants[tenantID] = t
		return nil
	})
}

func claimHash(c *claim) []byte { return c.hash }

// CreateClaimCode implements fleet.ClaimStore.
func (s *Store) CreateClaimCode(_ context.Context, c fleet.ClaimCode, codeHash []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tenants[c.TenantID]; !ok || s.deleted[c.TenantID] {
		return fleet.ErrNotFound
	}
	if hashed.Taken(s.claims, c.ID, codeHash, claimHash) {
		return fleet.ErrConflict
	}
	s.claims[c.ID] = &claim{ClaimCode: c, hash: bytes.Clone(codeHash)}
	return nil
}

// ClaimCodes implements fleet.ClaimStore.
func (s *Store) ClaimCodes(_ context.Context, tenantID string) ([]fleet.ClaimCode, error) {
	return locked.List(&s.mu, s.claims, func(c *claim) bool { return c.TenantID == tenantID },
		func(c *claim) fleet.ClaimCode { return c.ClaimCode },
		locked.NewestFirst(func(c fleet.ClaimCode) time.Time { return c.CreatedAt }, func(c fleet.ClaimCode) string { return c.ID })), nil
}

// ClaimCode implements fleet.ClaimStore.
func (s *Store) ClaimCode(_ context.Context, id string) (fleet.ClaimCode, error) {
	return locked.Get(&s.mu, s.claims, id, fleet.ErrNotFound, func(c *claim) fleet.ClaimCode { return c.ClaimCode })
}

// RevokeClaimCode implements fleet.ClaimStore.
func (s *Store) RevokeClaimCode(_ context.Context, id string, at time.Time) error {
	return locked.Update(&s.mu, s.claims, id, fleet.ErrNotFound, func(c *claim) error {
		if !c.UsedAt.IsZero() {
			return fleet.ErrConflict
		}
		if c.RevokedAt.IsZero() {
			c.RevokedAt = at
		}
		return nil
	})
}

// Redeem implements fleet.RedeemStore.
func (s *Store) Redeem(_ context.Context, r fleet.RedeemRecord) (fleet.Sensor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, _ := hashed.Find(s.claims, r.CodeHash, claimHash)
	if c == nil || !c.UsedAt.IsZero() || !c.RevokedAt.IsZero() || !c.ExpiresAt.After(r.At) {
		return fleet.Sensor{}, fleet.ErrInvalidClaimCode
	}
	if _, ok := s.sensors[r.SensorID]; ok {
		return fleet.Sensor{}, fleet.ErrConflict
	}
	if s.tokenIndex(r.TokenHash) >= 0 {
		return fleet.Sensor{}, fleet.ErrConflict
	}
	name := c.SensorName
	if name == "" {
		name = r.Hostname
	}
	if name == "" {
		name = r.SensorID
	}
	c.UsedAt, c.SensorID = r.At, r.SensorID
	sn := &sensor{Sensor: fleet.Sensor{ID: r.SensorID, TenantID: c.TenantID, Name: name, Hostname: r.Hostname, State: fleet.StatePending, CreatedAt: r.At}}
	s.sensors[sn.ID] = sn
	s.tokens = append(s.tokens, &token{Token: fleet.Token{SensorID: sn.ID, Kind: fleet.TokenEnrollment, Hash: bytes.Clone(r.TokenHash), ExpiresAt: r.TokenExpiresAt}})
	return sn.Sensor, nil
}

func (s *Store) tokenIndex(hash []byte) int {
	return slices.IndexFunc(s.tokens, func(t *token) bool { return bytes.Equal(t.Hash, hash) })
}

// LiveToken implements fleet.EnrollStore.
func (s *Store) LiveToken(_ context.Context, sensorID string, kind fleet.TokenKind) (fleet.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tokens {
		if t.SensorID == sensorID && t.Kind == kind && !t.used && !t.revoked {
			out := t.Token
			out.Hash = bytes.Clone(t.Hash)
			return out, nil
		}
	}
	return fleet.Token{}, fleet.ErrNotFound
}

// SensorCredential implements fleet.EnrollStore.
func (s *Store) SensorCredential(_ context.Context, sensorID string, kind fleet.TokenKind) (fleet.SensorCredential, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.sensors[sensorID]
	if !ok {
		return fleet.SensorCredential{}, fleet.ErrNotFound
	}
	c := fleet.SensorCredential{Sensor: s.view(sn), Token: fleet.Token{SensorID: sensorID, Kind: kind}}
	for _, t := range s.tokens {
		if t.SensorID == sensorID && t.Kind == kind && !t.used && !t.revoked {
			c.Token = t.Token
			c.Token.Hash = bytes.Clone(t.Hash)
			break
		}
	}
	c.TenantNATSStatus = s.tenants[sn.TenantID].NATSStatus
	return c, nil
}

// CompleteEnrollment implements fleet.EnrollStore.
func (s *Store) CompleteEnrollment(_ context.Context, e fleet.EnrollmentRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.liveSensor(e.SensorID)
	if err != nil {
		return err
	}
	i := s.tokenIndex(e.EnrollmentTokenHash)
	if i < 0 {
		return fleet.ErrInvalidToken
	}
	t := s.tokens[i]
	if t.SensorID != e.SensorID || t.Kind != fleet.TokenEnrollment || t.used || t.revoked || !t.ExpiresAt.After(e.At) {
		return fleet.ErrInvalidToken
	}
	if err := s.unused(e.Certificate.Serial, e.SensorTokenHash); err != nil {
		return err
	}
	t.used, t.usedAt = true, e.At
	s.replaceCertificate(e.SensorID, e.Certificate, e.At)
	if e.CSRSHA256 != nil {
		s.certs[e.Certificate.Serial].enrolment = activeEnrolment(e.Certificate.Serial, e.EnrollmentTokenHash, e.CSRSHA256, e.ProvenSignedAt)
	}
	s.rotateToken(e.SensorID, e.SensorTokenHash, e.SensorTokenExpiresAt, e.At)
	sn.State, sn.NATSUserPubKey, sn.NATSAccountPubKey = e.State, e.NATSUserPubKey, e.NATSAccountPubKey
	if e.Labels != nil {
		sn.Labels = maps.Clone(e.Labels)
	}
	return nil
}

// unused is fleet.ErrConflict when a certificate with the serial or a
// token with the hash is stored already: the PostgreSQL store's unique
// keys (s.mu held).
func (s *Store) unused(serial string, tokenHash []byte) error {
	if _, ok := s.certs[serial]; ok || s.tokenIndex(tokenHash) >= 0 {
		return fleet.ErrConflict
	}
	return nil
}

// activeEnrolment is what a certificate's enrolment proved, as the
// PostgreSQL store reads it back (times to the microsecond, in UTC).
func activeEnrolment(serial string, tokenHash, csrSHA256 []byte, signedAt time.Time) *fleet.ActiveEnrolment {
	return &fleet.ActiveEnrolment{
		Serial: serial, TokenHash: bytes.Clone(tokenHash), CSRSHA256: bytes.Clone(csrSHA256),
		ProvenSignedAt: signedAt.UTC().Truncate(time.Microsecond),
	}
}

// RenewCertificate implements fleet.EnrollStore.
func (s *Store) RenewCertificate(_ context.Context, r fleet.RenewalRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.liveSensor(r.SensorID)
	if err != nil {
		return err
	}
	if c, ok := s.certs[r.ReplacesSerial]; !ok || !c.active || c.sensorID != r.SensorID {
		return fleet.ErrInvalidToken
	}
	if err := s.unused(r.Certificate.Serial, r.SensorTokenHash); err != nil {
		return err
	}
	if r.NATS.UserPubKey != "" {
		sn.NATSUserPubKey, sn.NATSAccountPubKey = r.NATS.UserPubKey, r.NATS.AccountPubKey
	}
	s.replaceCertificate(r.SensorID, r.Certificate, r.At)
	if r.ProvenSerial != "" {
		s.certs[r.Certificate.Serial].renewal = &fleet.ActiveRenewal{
			Serial: r.Certificate.Serial, CSRSHA256: bytes.Clone(r.CSRSHA256),
			ProvenSerial: r.ProvenSerial, ProvenTokenHash: bytes.Clone(r.ProvenTokenHash),
			ProvenSignedAt: r.ProvenSignedAt.UTC().Truncate(time.Microsecond),
		}
	}
	if r.EnrolmentTokenHash != nil {
		s.certs[r.Certificate.Serial].enrolment = activeEnrolment(r.Certificate.Serial, r.EnrolmentTokenHash, r.CSRSHA256, r.ProvenSignedAt)
	}
	s.rotateToken(r.SensorID, r.SensorTokenHash, r.SensorTokenExpiresAt, r.At)
	// Keep the latest three superseded certificates.
	var old []*cert
	for _, c := range s.certs {
		if c.sensorID == r.SensorID && !c.active {
			old = append(old, c)
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].issuedAt.After(old[j].issuedAt) })
	for i := 3; i < len(old); i++ {
		delete(s.certs, old[i].serial)
	}
	return nil
}

// ActiveRenewal implements fleet.EnrollStore.
func (s *Store) ActiveRenewal(_ context.Context, sensorID string) (fleet.ActiveRenewal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.certs {
		if c.sensorID == sensorID && c.active && c.renewal != nil {
			r := *c.renewal
			r.CSRSHA256, r.ProvenTokenHash = bytes.Clone(r.CSRSHA256), bytes.Clone(r.ProvenTokenHash)
			return r, nil
		}
	}
	return fleet.ActiveRenewal{}, fleet.ErrNotFound
}

// ActiveEnrolment implements fleet.EnrollStore.
func (s *Store) ActiveEnrolment(_ context.Context, sensorID string) (fleet.ActiveEnrolment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.certs {
		if c.sensorID != sensorID || !c.active || c.enrolment == nil {
			continue
		}
		i := s.tokenIndex(c.enrolment.TokenHash)
		if i < 0 || s.tokens[i].SensorID != sensorID || s.tokens[i].Kind != fleet.TokenEnrollment {
			return fleet.ActiveEnrolment{}, fleet.ErrNotFound
		}
		e := *c.enrolment
		e.TokenHash, e.CSRSHA256 = bytes.Clone(e.TokenHash), bytes.Clone(e.CSRSHA256)
		e.TokenExpiresAt, e.TokenRevoked = s.tokens[i].ExpiresAt, s.tokens[i].revoked
		return e, nil
	}
	return fleet.ActiveEnrolment{}, fleet.ErrNotFound
}

// CertificateCount returns how many certificates the sensor holds.
func (s *Store) CertificateCount(_ context.Context, sensorID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.certs {
		if c.sensorID == sensorID {
			n++
		}
	}
	return n
}

// ActiveCertificateCount returns how many of the sensor's certificates
// are active; the fleet's rules keep it at most one.
func (s *Store) ActiveCertificateCount(sensorID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.certs {
		if c.sensorID == sensorID && c.active {
			n++
		}
	}
	return n
}

func (s *Store) rotateToken(sensorID string, hash []byte, expires, at time.Time) {
	for _, old := range s.tokens {
		if old.SensorID == sensorID && old.Kind == fleet.TokenSensor && !old.used {
			old.end(at)
		}
	}
	s.tokens = append(s.tokens, &token{Token: fleet.Token{SensorID: sensorID, Kind: fleet.TokenSensor, Hash: bytes.Clone(hash), ExpiresAt: expires}})
}

func (s *Store) liveSensor(id string) (*sensor, error) {
	sn, ok := s.sensors[id]
	if !ok {
		return nil, fleet.ErrNotFound
	}
	if sn.State == fleet.StateRevoked {
		return nil, fleet.ErrRevoked
	}
	return sn, nil
}

func (s *Store) replaceCertificate(sensorID string, c fleet.IssuedCertificate, at time.Time) {
	for _, old := range s.certs {
		if old.sensorID == sensorID {
			old.active = false
		}
	}
	s.certs[c.Serial] = &cert{serial: c.Serial, sensorID: sensorID, active: true, notAfter: c.NotAfter, issuedAt: at}
}

// Sensor implements fleet.SensorStore.
func (s *Store) Sensor(_ context.Context, id string) (fleet.Sensor, error) {
	return locked.Get(&s.mu, s.sensors, id, fleet.ErrNotFound, s.view)
}

func (s *Store) view(sn *sensor) fleet.Sensor {
	out := sn.Sensor
	out.Labels = maps.Clone(sn.Labels)
	if len(out.Labels) == 0 {
		out.Labels = nil
	}
	for _, c := range s.certs {
		if c.sensorID == sn.ID && c.active {
			out.Certificate = fleet.Certificate{Serial: c.serial, NotAfter: c.notAfter, IssuedAt: c.issuedAt}
		}
	}
	if c, ok := s.commands[sn.lastCommandID]; ok {
		cp := *c
		out.LastCommand = &cp
	}
	return out
}

// Sensors implements fleet.SensorStore.
func (s *Store) Sensors(_ context.Context, f fleet.SensorFilter) ([]fleet.Sensor, error) {
	return locked.List(&s.mu, s.sensors,
		func(sn *sensor) bool {
			return (f.TenantID == "" || sn.TenantID == f.TenantID) && (f.State == "" || sn.State == f.State)
		},
		s.view, locked.OldestFirst(func(sn fleet.Sensor) time.Time { return sn.CreatedAt }, func(sn fleet.Sensor) string { return sn.ID })), nil
}

// UpdateSensorStatuses implements fleet.StatusStore.
func (s *Store) UpdateSensorStatuses(_ context.Context, refs []fleet.SensorRef, apply func(fleet.SensorRef, fleet.SensorStatus, bool) (fleet.SensorStatus, bool)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range refs {
		sn, ok := s.sensors[ref.SensorID]
		found := ok && sn.TenantID == ref.TenantID
		var cur fleet.SensorStatus
		if found {
			cur = fleet.SensorStatus{State: sn.State, LastSeenAt: sn.LastSeenAt, LastStatusAt: sn.lastStatusAt,
				AgentVersion: sn.AgentVersion, Address: sn.Address}
		}
		next, store := apply(ref, cur, found)
		if !found || !store {
			continue
		}
		sn.State, sn.LastSeenAt, sn.lastStatusAt = next.State, next.LastSeenAt, next.LastStatusAt
		sn.AgentVersion, sn.Address = next.AgentVersion, next.Address
		for _, r := range next.Results {
			if c, ok := s.commands[r.CommandID]; ok && c.SensorID == ref.SensorID && c.AcknowledgedAt.IsZero() {
				c.AcknowledgedAt, c.Outcome, c.OutcomeReason, c.OutcomeDetail = next.AcknowledgedAt, r.Outcome, r.Reason, r.Detail
				c.Status, c.FailedAt = fleet.CommandAccepted, time.Time{}
				if c.AcceptedAt.IsZero() {
					c.AcceptedAt = next.AcknowledgedAt
				}
			}
		}
	}
	return nil
}

// CheckIn implements fleet.StatusStore.
func (s *Store) CheckIn(_ context.Context, in []fleet.SensorCheckIn, now, fresh time.Time) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recorded := make([]bool, len(in))
	for i, c := range in {
		sn, ok := s.sensors[c.Ref.SensorID]
		if !ok || sn.TenantID != c.Ref.TenantID || sn.State == fleet.StateRevoked {
			continue
		}
		cert, ok := s.certs[c.Serial]
		if !ok || cert.sensorID != sn.ID || !cert.active || !now.Before(cert.notAfter) {
			continue
		}
		recorded[i] = true
		if sn.State != fleet.StateOffline && !sn.LastSeenAt.Before(fresh) &&
			(c.AgentVersion == "" || c.AgentVersion == sn.AgentVersion) && (c.Address == "" || c.Address == sn.Address) {
			continue
		}
		if sn.State == fleet.StateOffline {
			sn.State = fleet.StateOnline
		}
		if now.After(sn.LastSeenAt) {
			sn.LastSeenAt = now
		}
		if c.AgentVersion != "" {
			sn.AgentVersion = c.AgentVersion
		}
		if c.Address != "" {
			sn.Address = c.Address
		}
	}
	return recorded, nil
}

// MarkSilent implements fleet.StatusStore.
func (s *Store) MarkSilent(_ context.Context, seenBefore time.Time, from []fleet.State, to fleet.State) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sn := range s.sensors {
		if slices.Contains(from, sn.State) && sn.LastSeenAt.Before(seenBefore) {
			sn.State = to
			n++
		}
	}
	return n, nil
}

// RevokeSensor implements fleet.RevokeStore.
func (s *Store) RevokeSensor(_ context.Context, sensorID, _ string, at time.Time) (fleet.Sensor, error) {
	return locked.Apply(&s.mu, s.sensors, sensorID, fleet.ErrNotFound, func(sn *sensor) (fleet.Sensor, error) {
		s.revoke(sn, at)
		return s.view(sn), nil
	})
}

// revoke revokes sn (s.mu held).
func (s *Store) revoke(sn *sensor, at time.Time) {
	sensorID := sn.ID
	if sn.revokedAt.IsZero() {
		sn.revokedAt = at
	}
	sn.State = fleet.StateRevoked
	for _, c := range s.certs {
		if c.sensorID == sensorID {
			c.active = false
		}
	}
	for _, t := range s.tokens {
		if t.SensorID == sensorID && !t.used {
			t.end(at)
		}
	}
}

// EditSensor implements fleet.LifecycleStore.
func (s *Store) EditSensor(_ context.Context, sensorID string, edit func(fleet.Sensor) (fleet.SensorEdit, error)) (fleet.Sensor, error) {
	return locked.Apply(&s.mu, s.sensors, sensorID, fleet.ErrNotFound, func(sn *sensor) (fleet.Sensor, error) {
		e, err := edit(s.view(sn))
		if err != nil {
			return fleet.Sensor{}, err
		}
		sn.Name, sn.Labels = e.Name, maps.Clone(e.Labels)
		return s.view(sn), nil
	})
}

// DecommissionSensor implements fleet.LifecycleStore.
func (s *Store) DecommissionSensor(_ context.Context, sensorID, by string, at time.Time) (fleet.Sensor, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.sensors[sensorID]
	if !ok {
		return fleet.Sensor{}, false, fleet.ErrNotFound
	}
	if !sn.DecommissionedAt.IsZero() {
		return s.view(sn), true, nil
	}
	s.revoke(sn, at)
	sn.DecommissionedAt, sn.DecommissionedBy = at, by
	for _, c := range s.commands {
		if c.SensorID == sensorID && c.Status == fleet.CommandPending && c.AcknowledgedAt.IsZero() {
			c.Status = fleet.CommandExpired
		}
	}
	return s.view(sn), false, nil
}

// CreateCommand implements fleet.CommandStore.
func (s *Store) CreateCommand(_ context.Context, c fleet.Command) (fleet.Command, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.sensors[c.SensorID]
	if !ok {
		return fleet.Command{}, false, fleet.ErrNotFound
	}
	if _, ok := s.commands[c.ID]; ok {
		return fleet.Command{}, false, fleet.ErrConflict
	}
	if c.IdempotencyKey != "" {
		for _, old := range s.commands {
			if old.SensorID == c.SensorID && old.IdempotencyKey == c.IdempotencyKey {
				if old.Action != c.Action {
					return fleet.Command{}, false, fleet.ErrConflict
				}
				return *old, false, nil
			}
		}
	}
	c.Status, c.FirstSentAt = fleet.CommandPending, c.IssuedAt
	s.commands[c.ID] = &c
	sn.lastCommandID, sn.namedCommandID = c.ID, c.ID
	return c, true, nil
}

// AcceptCommand implements fleet.CommandStore.
func (s *Store) AcceptCommand(_ context.Context, id string, seq uint64, at time.Time) error {
	return locked.Update(&s.mu, s.commands, id, fleet.ErrNotFound, func(c *fleet.Command) error {
		if c.Status == fleet.CommandPending || c.Status == fleet.CommandAccepted {
			if c.AcceptedAt.IsZero() {
				c.AcceptedAt, c.StreamSeq = at, seq
			}
			c.Status = fleet.CommandAccepted
		}
		return nil
	})
}

// FailCommand implements fleet.CommandStore.
func (s *Store) FailCommand(_ context.Context, id string, at time.Time) error {
	return locked.Update(&s.mu, s.commands, id, fleet.ErrNotFound, func(c *fleet.Command) error {
		failCommand(c, at)
		return nil
	})
}

// failCommand marks c failed at at unless it was sent or acknowledged
// (s.mu held).
func failCommand(c *fleet.Command, at time.Time) {
	if c.Status == fleet.CommandPending && c.AcknowledgedAt.IsZero() {
		c.Status, c.FailedAt = fleet.CommandFailed, at
	}
}

// PendingCommands implements fleet.CommandStore.
func (s *Store) PendingCommands(_ context.Context, since time.Time, limit int) ([]fleet.Command, error) {
	out := locked.List(&s.mu, s.commands,
		func(c *fleet.Command) bool {
			return c.Status == fleet.CommandPending && !c.FirstSentAt.IsZero() && !c.FirstSentAt.Before(since)
		},
		func(c *fleet.Command) fleet.Command { return *c },
		locked.OldestFirst(func(c fleet.Command) time.Time { return c.FirstSentAt }, func(c fleet.Command) string { return c.ID }))
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ExpireCommands implements fleet.CommandStore.
func (s *Store) ExpireCommands(_ context.Context, before time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.commands {
		if (c.Status == fleet.CommandPending || c.Status == fleet.CommandAccepted) && c.AcknowledgedAt.IsZero() && c.ExpiresAt.Before(before) {
			c.Status = fleet.CommandExpired
			n++
		}
	}
	return n, nil
}

// SensorCommands implements fleet.CommandStore.
func (s *Store) SensorCommands(_ context.Context, sensorID string, after fleet.CommandCursor, limit int) ([]fleet.Command, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	newer := func(a fleet.Command, at time.Time, id string) bool {
		return a.IssuedAt.After(at) || a.IssuedAt.Equal(at) && a.ID > id
	}
	var out []fleet.Command
	for _, c := range s.commands {
		if c.SensorID == sensorID && (after.ID == "" || newer(fleet.Command{IssuedAt: after.IssuedAt, ID: after.ID}, c.IssuedAt, c.ID)) {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return newer(out[i], out[j].IssuedAt, out[j].ID) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// TryLock implements fleet.Locker within this process.
func (s *Store) TryLock(_ context.Context, name string) (func(), bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks[name] {
		return nil, false, nil
	}
	s.locks[name] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.locks, name)
		})
	}, true, nil
}
