package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/rxc-project/rxc/core/ids"
)

// StatusPorts is everything the status side reads and writes: sensors (to
// authorise a certificate) and their status.
type StatusPorts interface {
	SensorStore
	StatusStore
}

// StatusConfig wires a StatusService. Zero values take the defaults.
type StatusConfig struct {
	Store StatusPorts
	// MaxClockSkew bounds how far ahead of the server clock a report's
	// "at" may lie (default DefaultMaxClockSkew).
	MaxClockSkew time.Duration
	Logger       *slog.Logger
	Clock        func() time.Time
}

// StatusService is the status side of the fleet: what sensors say about
// themselves (status reports, health checks) and whether a sensor's
// certificate is the one that lets it in. It needs nothing but its store:
// no certificate authority, provisioner, publisher or session terminator,
// so the gRPC edge, which the fleet's revocation ends streams through, is
// built on it before the rest of the fleet exists, and no construction
// cycle needs a late-bound terminator.
type StatusService struct {
	store   StatusPorts
	maxSkew time.Duration
	clocked
}

// NewStatusService checks cfg and returns a StatusService.
func NewStatusService(cfg StatusConfig) (*StatusService, error) {
	if cfg.Store == nil {
		return nil, errors.New("fleet: status: store is required")
	}
	switch {
	case cfg.MaxClockSkew < 0:
		return nil, errors.New("fleet: status: negative clock skew")
	case cfg.MaxClockSkew == 0:
		cfg.MaxClockSkew = DefaultMaxClockSkew
	}
	return &StatusService{store: cfg.Store, maxSkew: cfg.MaxClockSkew, clocked: newClocked(cfg.Logger, cfg.Clock)}, nil
}

// StatusUpdate is one status report as received: the sensor it came from,
// as the channel it arrived on names it (never the report), and the report
// its transport decoded.
type StatusUpdate struct {
	Sensor SensorRef
	Report StatusReport
	// Confirm, when set, is called with the report's settled results once
	// they are durable (see ResultsConfirmation); nil when the sensor
	// asked for no confirmation (agents before the outbox).
	Confirm func(ResultsConfirmation)
}

// HandleStatus applies one status report; see HandleStatusBatch.
func (s *StatusService) HandleStatus(ctx context.Context, tenantID, sensorID string, r StatusReport) error {
	return s.HandleStatusBatch(ctx, []StatusUpdate{{Sensor: SensorRef{TenantID: tenantID, SensorID: sensorID}, Report: r}})[0]
}

// HandleStatusBatch applies status updates and returns one error per
// update (nil when applied). A sensor's identity comes only from the
// update's ids, which the transport takes from where the report arrived.
// Reports older than the last applied one give ErrStale, unknown
// sensors ErrNotFound, revoked sensors ErrRevoked, malformed ones
// ErrInvalidInput; none of them changes anything. A report naming a command
// of its sensor marks that command acknowledged. Reports of one sensor are
// applied in the order of their "at", so a batch gives the same result as
// applying its messages one by one in that order. Once the batch is
// stored, each update with a Confirm is told the command ids of its
// results now settled (see ResultsConfirmation); nothing is confirmed when
// the store fails, nor for unknown or revoked sensors or invalid reports.
func (s *StatusService) HandleStatusBatch(ctx context.Context, msgs []StatusUpdate) []error {
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
	recorded := make([][]string, len(msgs))
	err := s.store.UpdateSensorStatuses(ctx, refs, func(ref SensorRef, cur SensorStatus, found bool) (SensorStatus, bool) {
		reports := bySensor[ref]
		if !found {
			for _, rp := range reports {
				errs[rp.idx] = ErrNotFound
				recorded[rp.idx] = nil // a retried transaction may find the sensor gone
			}
			return cur, false
		}
		sort.SliceStable(reports, func(i, j int) bool { return reports[i].r.At.Before(reports[j].r.At) })
		next, changed := cur, false
		next.Results = nil
		for _, rp := range reports {
			recorded[rp.idx] = nil // apply may run again when the transaction is retried
			if next.State == StateRevoked {
				errs[rp.idx] = ErrRevoked
				continue
			}
			// Results count even in a report too old for its state: they
			// may be the repeat of one that could not be recorded.
			if res := rp.r.results(); len(res) > 0 {
				next.Results, next.AcknowledgedAt, changed = append(next.Results, res...), now, true
				recorded[rp.idx] = resultIDs(res)
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
		return errs
	}
	confirmRecorded(msgs, recorded)
	return errs
}

// parseStatus validates a status update: ids, report and clock.
func (s *StatusService) parseStatus(m StatusUpdate, now time.Time) (SensorRef, StatusReport, error) {
	tenantID, sensorID := m.Sensor.TenantID, m.Sensor.SensorID
	if err := validateID("tenant id", tenantID); err != nil {
		return SensorRef{}, StatusReport{}, err
	}
	if err := validateID("sensor id", sensorID); err != nil {
		return SensorRef{}, StatusReport{}, err
	}
	r, err := CheckStatusReport(m.Report)
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
func (s *StatusService) MarkSilentOffline(ctx context.Context, silence time.Duration) (int, error) {
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
func (s *StatusService) AuthorizeSensor(ctx context.Context, tenantID, sensorID, serial string) error {
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

// CheckIn is one health check for CheckIns: the sensor its verified
// certificate names, that certificate's serial, and what the call tells.
type CheckIn struct {
	Ref     SensorRef
	Serial  string
	Contact Contact
}

// SensorCheckIn is one check-in for StatusStore.CheckIn: Serial in lower
// case, AgentVersion and Address already cleaned ("" keeps the stored
// value).
type SensorCheckIn struct {
	Ref                   SensorRef
	Serial                string
	AgentVersion, Address string
}

// CheckInRefresh: a health check within this long of the sensor's last
// recorded sign of life (its status report, sent with the check, usually
// is) that changes nothing else is authorised but not written again, so
// lastSeenAt is exact to this much. It is far below SENSOR_OFFLINE_AFTER.
const CheckInRefresh = 5 * time.Second

// CheckIn is CheckIns for one health check.
func (s *StatusService) CheckIn(ctx context.Context, tenantID, sensorID, serial string, c Contact) error {
	return s.CheckIns(ctx, []CheckIn{{Ref: SensorRef{TenantID: tenantID, SensorID: sensorID}, Serial: serial, Contact: c}})[0]
}

// CheckIns authorises and records many health checks at once (a replica
// batches its sensors' checks); the error of in[i] is errs[i]. A check-in
// succeeds only where AuthorizeSensor would let its certificate in (the
// sensor exists in that tenant, is not revoked, and Serial is its active,
// unexpired certificate's serial), and its sign of life (lastSeenAt, what
// the contact tells; an offline sensor wakes to online) is recorded by the
// same store statement that checked it: the authorisation
// is read from the database on every call, never from a cache, so a
// revocation or renewal committed through any replica refuses the next
// check on every replica. A refused check-in records nothing and gets
// AuthorizeSensor's error. Several check-ins of one certificate are
// recorded once, their contacts applied in order.
func (s *StatusService) CheckIns(ctx context.Context, in []CheckIn) (errs []error) {
	errs = make([]error, len(in))
	type key struct {
		ref    SensorRef
		serial string
	}
	slot := map[key]int{}
	var (
		batch []SensorCheckIn
		users [][]int
	)
	for i, c := range in {
		if ids.Validate(c.Ref.TenantID) != nil || ids.Validate(c.Ref.SensorID) != nil {
			errs[i] = fmt.Errorf("sensor %q in tenant %q: %w", c.Ref.SensorID, c.Ref.TenantID, ErrNotFound)
			continue
		}
		if c.Serial == "" {
			errs[i] = fmt.Errorf("sensor %s: no certificate serial: %w", c.Ref.SensorID, ErrInvalidToken)
			continue
		}
		k := key{c.Ref, strings.ToLower(c.Serial)}
		j, ok := slot[k]
		if !ok {
			j = len(batch)
			slot[k] = j
			batch = append(batch, SensorCheckIn{Ref: k.ref, Serial: k.serial})
			users = append(users, nil)
		}
		users[j] = append(users[j], i)
		if v := cleanAgentVersion(c.Contact.AgentVersion); v != "" {
			batch[j].AgentVersion = v
		}
		if a := c.Contact.Address; a != "" && validateLabel("address", a, maxAddress) == nil {
			batch[j].Address = a
		}
	}
	if len(batch) == 0 {
		return errs
	}
	now := s.now()
	recorded, err := s.store.CheckIn(ctx, batch, now, now.Add(-CheckInRefresh))
	if err == nil && len(recorded) != len(batch) {
		err = fmt.Errorf("check in: the store answered %d of %d check-ins", len(recorded), len(batch))
	}
	for j, c := range batch {
		var why error
		switch {
		case err != nil:
			why = err
		case recorded[j]:
			continue
		default:
			// Refused: say why, as the authorisation of any other call
			// would. Only refusals pay this read.
			why = s.AuthorizeSensor(ctx, c.Ref.TenantID, c.Ref.SensorID, c.Serial)
			if why == nil {
				// Changed between the two statements (an enrolment
				// completed): the check itself was refused.
				why = fmt.Errorf("sensor %s: certificate not active when checked: %w", c.Ref.SensorID, ErrInvalidToken)
			}
		}
		for _, i := range users[j] {
			errs[i] = why
		}
	}
	return errs
}
