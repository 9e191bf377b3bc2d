package fleet

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rxc-project/rxc/core/ids"
	"github.com/rxc-project/rxc/core/logkey"
)

// SensorStore reads sensors.
type SensorStore interface {
	// Sensor returns one sensor with its active certificate and last command.
	Sensor(ctx context.Context, id string) (Sensor, error)
	// Sensors lists sensors matching f, oldest first.
	Sensors(ctx context.Context, f SensorFilter) ([]Sensor, error)
}

// SensorStatus is the part of a sensor that status reports change.
type SensorStatus struct {
	State        State
	LastSeenAt   time.Time
	LastStatusAt time.Time // "at" of the last applied report
	// AgentVersion and Address are what the sensor last said about itself;
	// stores keep them as given.
	AgentVersion string
	Address      string
	// Results, when set on the way out, are outcomes of this sensor's
	// commands to record at AcknowledgedAt; a command keeps the first.
	Results        []CommandResult
	AcknowledgedAt time.Time
}

// SensorRef names a sensor of a tenant, as a status subject does.
type SensorRef struct {
	TenantID string
	SensorID string
}

// StatusStore applies status changes.
type StatusStore interface {
	// UpdateSensorStatuses locks the sensors named by refs, passes each
	// one's status to apply (found is false for a sensor that does not exist
	// in that tenant) and stores the statuses apply asks to store, all in one
	// transaction. Batching is what lets a replica keep up with a fleet's
	// status traffic.
	UpdateSensorStatuses(ctx context.Context, refs []SensorRef, apply func(ref SensorRef, cur SensorStatus, found bool) (next SensorStatus, store bool)) error
	// MarkSilent moves sensors in one of the states from, last seen before
	// seenBefore, to state to, and returns how many moved.
	MarkSilent(ctx context.Context, seenBefore time.Time, from []State, to State) (int, error)
}

// RevokeStore performs a revocation atomically.
type RevokeStore interface {
	// RevokeSensor, in one transaction, sets the sensor revoked (keeping the
	// first revocation), deactivates its certificates and revokes its tokens,
	// and returns it. Repeats are no-ops that return the sensor.
	RevokeSensor(ctx context.Context, sensorID, by string, at time.Time) (Sensor, error)
}

// SessionTerminator cancels a sensor's live gRPC streams.
type SessionTerminator interface {
	Terminate(tenantID, sensorID string)
}

// Sensor returns one sensor.
func (s *Service) Sensor(ctx context.Context, id string) (Sensor, error) {
	if err := validateID("sensor id", id); err != nil {
		return Sensor{}, err
	}
	return s.store.Sensor(ctx, id)
}

// Sensors lists sensors, optionally of one tenant and in one state.
func (s *Service) Sensors(ctx context.Context, f SensorFilter) ([]Sensor, error) {
	if f.TenantID != "" {
		if err := validateID("tenant id", f.TenantID); err != nil {
			return nil, err
		}
	}
	if f.State != "" && !f.State.Valid() {
		return nil, fmt.Errorf("%w: state %q", ErrInvalidInput, f.State)
	}
	return s.store.Sensors(ctx, f)
}

// StatusMessage is one status report as received: the sensor it came from,
// as the channel it arrived on names it (never the payload), and its body.
type StatusMessage struct {
	TenantID, SensorID string
	Payload            []byte
}

// HandleStatus applies one status report; see HandleStatusBatch.
func (s *Service) HandleStatus(ctx context.Context, tenantID, sensorID string, payload []byte) error {
	return s.HandleStatusBatch(ctx, []StatusMessage{{TenantID: tenantID, SensorID: sensorID, Payload: payload}})[0]
}

// HandleStatusBatch applies status messages and returns one error per
// message (nil when applied). A sensor's identity comes only from the
// message's ids, which the transport takes from where the message arrived. Reports older than the last applied one give ErrStale, unknown
// sensors ErrNotFound, revoked sensors ErrRevoked, malformed ones
// ErrInvalidInput; none of them changes anything. A report naming a command
// of its sensor marks that command acknowledged. Reports of one sensor are
// applied in the order of their "at", so a batch gives the same result as
// applying its messages one by one in that order.
func (s *Service) HandleStatusBatch(ctx context.Context, msgs []StatusMessage) []error {
	errs := make([]error, len(msgs))
	now := s.now()
	type report struct {
		idx int
		r   StatusReport
	}
	bySensor := map[SensorRef][]report{}
	var refs []SensorRef
	for i, m := range msgs {
		ref, r, err := s.parseStatus(m, now)
		if err != nil {
			errs[i] = err
			continue
		}
		if _, ok := bySensor[ref]; !ok {
			refs = append(refs, ref)
		}
		bySensor[ref] = append(bySensor[ref], report{idx: i, r: r})
	}
	if len(refs) == 0 {
		return errs
	}
	err := s.store.UpdateSensorStatuses(ctx, refs, func(ref SensorRef, cur SensorStatus, found bool) (SensorStatus, bool) {
		reports := bySensor[ref]
		if !found {
			for _, rp := range reports {
				errs[rp.idx] = ErrNotFound
			}
			return cur, false
		}
		sort.SliceStable(reports, func(i, j int) bool { return reports[i].r.At.Before(reports[j].r.At) })
		next, changed := cur, false
		next.Results = nil
		for _, rp := range reports {
			if next.State == StateRevoked {
				errs[rp.idx] = ErrRevoked
				continue
			}
			// Results count even in a report too old for its state: they
			// may be the repeat of one that could not be recorded.
			if res := rp.r.results(); len(res) > 0 {
				next.Results, next.AcknowledgedAt, changed = append(next.Results, res...), now, true
			}
			switch st, ok := Transition(next.State, rp.r.State); {
			case rp.r.At.Before(next.LastStatusAt):
				errs[rp.idx] = ErrStale
			case !ok:
				errs[rp.idx] = fmt.Errorf("%w: transition %s → %s", ErrInvalidInput, next.State, rp.r.State)
			default:
				next.State, next.LastSeenAt, next.LastStatusAt, changed = st, now, rp.r.At, true
				if v := cleanAgentVersion(rp.r.AgentVersion); v != "" {
					next.AgentVersion = v
				}
			}
		}
		return next, changed
	})
	if err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// parseStatus validates a status message: ids, payload and clock.
func (s *Service) parseStatus(m StatusMessage, now time.Time) (SensorRef, StatusReport, error) {
	tenantID, sensorID := m.TenantID, m.SensorID
	if err := validateID("tenant id", tenantID); err != nil {
		return SensorRef{}, StatusReport{}, err
	}
	if err := validateID("sensor id", sensorID); err != nil {
		return SensorRef{}, StatusReport{}, err
	}
	r, err := ParseStatusReport(m.Payload)
	if err != nil {
		return SensorRef{}, StatusReport{}, err
	}
	if r.At.After(now.Add(s.maxSkew)) {
		return SensorRef{}, StatusReport{}, fmt.Errorf("%w: status time %s is ahead of the server clock", ErrInvalidInput, r.At.Format(time.RFC3339))
	}
	return SensorRef{TenantID: tenantID, SensorID: sensorID}, r, nil
}

// silentStates are the states MarkSilentOffline leaves: pending sensors
// never spoke, offline ones already are, revoked is terminal.
var silentStates = []State{StateOnline, StateRunning, StateStopped, StateError}

// MarkSilentOffline moves sensors not seen for silence to offline.
func (s *Service) MarkSilentOffline(ctx context.Context, silence time.Duration) (int, error) {
	if silence <= 0 {
		return 0, fmt.Errorf("%w: silence must be positive", ErrInvalidInput)
	}
	n, err := s.store.MarkSilent(ctx, s.now().Add(-silence), silentStates, StateOffline)
	if err != nil {
		return 0, fmt.Errorf("mark silent sensors offline: %w", err)
	}
	if n > 0 {
		s.log.InfoContext(ctx, "silent sensors marked offline", "count", n)
	}
	return n, nil
}

// AuthorizeSensor is the gRPC check: nil only when the sensor exists in
// that tenant, is not revoked, and serial is its active, unexpired
// certificate's serial.
func (s *Service) AuthorizeSensor(ctx context.Context, tenantID, sensorID, serial string) error {
	if ids.Validate(tenantID) != nil || ids.Validate(sensorID) != nil {
		return fmt.Errorf("sensor %q in tenant %q: %w", sensorID, tenantID, ErrNotFound)
	}
	sensor, err := s.store.Sensor(ctx, sensorID)
	if err != nil {
		return err
	}
	if sensor.TenantID != tenantID {
		return fmt.Errorf("sensor %s in tenant %s: %w", sensorID, tenantID, ErrNotFound)
	}
	if sensor.State == StateRevoked {
		return fmt.Errorf("sensor %s: %w", sensorID, ErrRevoked)
	}
	c := sensor.Certificate
	if serial == "" || c.Serial != strings.ToLower(serial) || !s.now().Before(c.NotAfter) {
		return fmt.Errorf("sensor %s: certificate not active: %w", sensorID, ErrInvalidToken)
	}
	return nil
}

// Contact is what a sign of life tells about the sensor; empty fields
// leave what is known.
type Contact struct {
	// Address is the network address the sensor called from.
	Address string
	// AgentVersion is the version its agent reported.
	AgentVersion string
}

// Bounds of what a sensor says about itself.
const (
	maxAgentVersion = 64
	maxAddress      = 64
)

// cleanAgentVersion keeps a reported version when it is short and
// printable, else "" (not recorded).
func cleanAgentVersion(v string) string {
	if validateLabel("agent version", v, maxAgentVersion) != nil {
		return ""
	}
	return v
}

// SensorSeen records a sign of life other than a status report (a gRPC
// call, a health check): it refreshes lastSeenAt, records what c tells,
// and wakes an offline sensor to online.
func (s *Service) SensorSeen(ctx context.Context, tenantID, sensorID string, c Contact) error {
	return s.SensorsSeen(ctx, []Seen{{Ref: SensorRef{TenantID: tenantID, SensorID: sensorID}, Contact: c}})[0]
}

// Seen is one sign of life for SensorsSeen.
type Seen struct {
	Ref     SensorRef
	Contact Contact
}

// SensorsSeen is SensorSeen for many signs of life in one store
// transaction (a replica batches its sensors' health checks); the error of
// seen[i] is errs[i]. Several of one sensor are applied in order.
func (s *Service) SensorsSeen(ctx context.Context, seen []Seen) (errs []error) {
	errs = make([]error, len(seen))
	bySensor := map[SensorRef][]int{}
	var refs []SensorRef
	for i, x := range seen {
		if err := validateID("tenant id", x.Ref.TenantID); err != nil {
			errs[i] = err
			continue
		}
		if err := validateID("sensor id", x.Ref.SensorID); err != nil {
			errs[i] = err
			continue
		}
		if _, ok := bySensor[x.Ref]; !ok {
			refs = append(refs, x.Ref)
		}
		bySensor[x.Ref] = append(bySensor[x.Ref], i)
	}
	if len(refs) == 0 {
		return errs
	}
	now := s.now()
	err := s.store.UpdateSensorStatuses(ctx, refs, func(ref SensorRef, cur SensorStatus, found bool) (SensorStatus, bool) {
		idx := bySensor[ref]
		var refused error
		switch {
		case !found:
			refused = ErrNotFound
		case cur.State == StateRevoked:
			refused = ErrRevoked
		case cur.State == StateOffline:
			cur.State = StateOnline
		}
		if refused != nil {
			for _, i := range idx {
				errs[i] = refused
			}
			return cur, false
		}
		cur.LastSeenAt = now
		for _, i := range idx {
			c := seen[i].Contact
			if v := cleanAgentVersion(c.AgentVersion); v != "" {
				cur.AgentVersion = v
			}
			if a := c.Address; a != "" && len(a) <= maxAddress && validateLabel("address", a, maxAddress) == nil {
				cur.Address = a
			}
		}
		return cur, true
	})
	if err != nil {
		for _, idx := range bySensor {
			for _, i := range idx {
				errs[i] = err
			}
		}
	}
	return errs
}

// RevokeSensor revokes a sensor for good: state revoked, certificates
// deactivated, live gRPC streams cancelled, NATS user revoked through the
// provisioner. When that last step fails the sensor stays revoked locally
// and the error is returned; calling again retries it.
func (s *Service) RevokeSensor(ctx context.Context, sensorID, by string) error {
	if err := validateID("sensor id", sensorID); err != nil {
		return err
	}
	if err := validateLabel("revoked by", by, maxIssuer); err != nil {
		return err
	}
	sensor, err := s.store.RevokeSensor(ctx, sensorID, by, s.now())
	if err != nil {
		return fmt.Errorf("revoke sensor %s: %w", sensorID, err)
	}
	s.terminator.Terminate(sensor.TenantID, sensor.ID)
	s.log.InfoContext(ctx, "sensor revoked", logkey.Tenant, sensor.TenantID, logkey.Sensor, sensor.ID, "by", by)
	if sensor.NATSUserPubKey == "" {
		return nil
	}
	if !s.provisioning {
		return fmt.Errorf("sensor %s revoked; its NATS user must be revoked once provisioning is enabled: %w: %w", sensorID, ErrNATSRevokePending, ErrProvisionerDisabled)
	}
	if err := s.provisioner.RevokeUser(ctx, sensor.NATSAccountPubKey, sensor.NATSUserPubKey); err != nil {
		s.log.WarnContext(ctx, "nats user revocation failed; retry the revocation", logkey.Sensor, sensor.ID, logkey.Error, err)
		return fmt.Errorf("sensor %s revoked; revoking its NATS user failed and must be retried: %w: %w", sensorID, ErrNATSRevokePending, err)
	}
	return nil
}
