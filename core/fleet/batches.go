package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rxc-project/rxc/sdk/logkey"
)

// ErrBatchTooLarge refuses a batch naming or matching more sensors than
// allowed.
var ErrBatchTooLarge = errors.New("batch too large")

// Bounds of command batches.
const (
	// MaxBatchSensorIDs bounds the sensor ids one batch may name.
	MaxBatchSensorIDs = 10_000
	// MaxBatchMatch bounds the sensors a batch's filter may match.
	MaxBatchMatch = 50_000
	// DefaultBatchConcurrency bounds a replica's publications in flight
	// (the window of a pipelining publisher).
	DefaultBatchConcurrency = 256
	// batchClaim is how many queued commands a replica takes at a time.
	batchClaim = 512
)

// Batch is one operator request for a command to many sensors: audited
// once, one command per sensor underneath, each settled exactly like a
// command to one sensor.
type Batch struct {
	ID         string
	Action     Action
	CreatedAt  time.Time
	CreatedBy  string
	OperatorID string
	// IdempotencyKey is the operator's key ("" when none): a repeat of the
	// same request with it returns this batch.
	IdempotencyKey string
	// RequestHash digests the request (action and targets), telling a
	// repeat from another request that reuses the key.
	RequestHash []byte
	// TenantIDs are the tenants the batch touched, sorted: who may read it.
	TenantIDs []string
	// Matched sensors were named or matched; Total got a command; the rest
	// were skipped, revoked or not enrolled (never a command).
	Matched            int
	Total              int
	SkippedRevoked     int
	SkippedNotEnrolled int
	// Counts is filled by BatchStore.Batch.
	Counts BatchCounts
}

// BatchCounts are where a batch's commands stand. Pending, Accepted,
// Failed and Expired add up to Total (a command's status); Acknowledged
// (applied) and Refused count the sensors' reports among the accepted.
type BatchCounts struct {
	Pending      int
	Accepted     int
	Failed       int
	Expired      int
	Acknowledged int
	Refused      int
}

// SensorTarget is what a batch needs of a sensor.
type SensorTarget struct {
	ID       string
	TenantID string
	State    State
}

// CommandAck records one stream acknowledgement.
type CommandAck struct {
	ID  string
	Seq uint64
	At  time.Time
}

// BatchStore persists batches and hands their commands to publishers.
type BatchStore interface {
	// SensorTargets returns the sensors among ids that exist (any order).
	SensorTargets(ctx context.Context, ids []string) ([]SensorTarget, error)
	// MatchSensors returns the sensors m selects, at most limit.
	MatchSensors(ctx context.Context, m SensorMatch, limit int) ([]SensorTarget, error)
	// CreateBatch records b and its commands (status pending, never sent)
	// in one transaction and makes each its sensor's last command. A
	// command whose sensor is no longer in its tenant, enrolled and
	// unrevoked when the transaction runs is left out and counted as
	// skipped. With an idempotency key the operator used before, nothing is
	// written and the existing batch is returned with created false;
	// ErrConflict when it was made by another request.
	CreateBatch(ctx context.Context, b Batch, cmds []Command) (stored Batch, created bool, err error)
	// Batch returns a batch with its counts.
	Batch(ctx context.Context, id string) (Batch, error)
	// BatchByKey returns the batch an operator made with an idempotency
	// key (without counts), or ErrNotFound.
	BatchByKey(ctx context.Context, operatorID, key string) (Batch, error)
	// ClaimUnsentCommands marks at most limit never-sent, pending, unexpired
	// commands (oldest first) as sent at at, and returns them. Concurrent
	// claims (other replicas) never get the same command.
	ClaimUnsentCommands(ctx context.Context, at time.Time, limit int) ([]Command, error)
	// AcceptCommands marks pending commands accepted by the stream.
	AcceptCommands(ctx context.Context, acks []CommandAck) error
	// FailCommands marks pending commands failed (provably not stored).
	FailCommands(ctx context.Context, ids []string, at time.Time) error
}

// BatchRequest asks for a command to many sensors: exactly one of
// SensorIDs and Filter.
type BatchRequest struct {
	Action    Action
	SensorIDs []string
	Filter    *SensorMatch
	// Scope is the tenants the requester may command (nil: every tenant).
	// Sensors outside it are answered as not found.
	Scope          []string
	IssuedBy       string
	OperatorID     string
	IdempotencyKey string
}

// CreateBatch records a batch and its commands and returns it at once;
// the commands are published in the background (PublishQueued) by this or
// any other replica. Named sensors must all exist within the scope, or
// nothing is done and ErrNotFound names none of them. Revoked and
// never-enrolled sensors are skipped and counted. created is false for a
// repeat with the same idempotency key.
func (s *Commands) CreateBatch(ctx context.Context, req BatchRequest) (Batch, bool, error) {
	if !req.Action.Valid() {
		return Batch{}, false, fmt.Errorf("%w: action %q (want start or stop)", ErrInvalidInput, req.Action)
	}
	if err := validateLabel("issuer", req.IssuedBy, maxIssuer); err != nil {
		return Batch{}, false, err
	}
	if err := validateIdempotencyKey(req.IdempotencyKey); err != nil {
		return Batch{}, false, err
	}
	if req.OperatorID == "" {
		return Batch{}, false, fmt.Errorf("%w: a batch needs the operator who asks for it", ErrInvalidInput)
	}
	if (req.Filter == nil) == (req.SensorIDs == nil) {
		return Batch{}, false, fmt.Errorf("%w: give exactly one of sensorIds and filter", ErrInvalidInput)
	}
	ids, match, hash, err := normalizeTargets(req)
	if err != nil {
		return Batch{}, false, err
	}
	if req.IdempotencyKey != "" {
		// A repeat is answered before anything else is looked at.
		b, err := s.store.BatchByKey(ctx, req.OperatorID, req.IdempotencyKey)
		switch {
		case err == nil && !bytes.Equal(b.RequestHash, hash):
			return Batch{}, false, fmt.Errorf("%w: the idempotency key was used for another batch request", ErrConflict)
		case err == nil && req.Scope != nil && slices.ContainsFunc(b.TenantIDs, func(t string) bool { return !slices.Contains(req.Scope, t) }):
			// The same operator's key, but a narrower caller now (an API
			// token, or tenants taken away): the batch is not theirs to
			// see, as GET /api/commands/batches/{id} says.
			return Batch{}, false, fmt.Errorf("batch of idempotency key: %w", ErrNotFound)
		case err == nil:
			return s.withCounts(ctx, b)
		case !errors.Is(err, ErrNotFound):
			return Batch{}, false, fmt.Errorf("look up batch: %w", err)
		}
	}
	targets, err := s.resolveTargets(ctx, ids, match, req.Scope)
	if err != nil {
		return Batch{}, false, err
	}
	id, err := NewUUID()
	if err != nil {
		return Batch{}, false, err
	}
	now := s.now()
	b := Batch{
		ID: id, Action: req.Action, CreatedAt: now.Truncate(time.Microsecond), CreatedBy: req.IssuedBy, OperatorID: req.OperatorID,
		IdempotencyKey: req.IdempotencyKey, RequestHash: hash, Matched: len(targets),
	}
	tenants := map[string]bool{}
	if req.Filter != nil && len(req.Filter.Tenants) == 1 {
		tenants[req.Filter.Tenants[0]] = true
	}
	cmds := make([]Command, 0, len(targets))
	for _, t := range targets {
		tenants[t.TenantID] = true
		switch t.State {
		case StateRevoked:
			b.SkippedRevoked++
			continue
		case StatePending:
			b.SkippedNotEnrolled++
			continue
		}
		cid, err := NewUUID()
		if err != nil {
			return Batch{}, false, err
		}
		cmds = append(cmds, Command{
			ID: cid, TenantID: t.TenantID, SensorID: t.ID, Action: req.Action,
			IssuedAt: now, IssuedBy: req.IssuedBy, ExpiresAt: now.Add(s.commandTTL),
			Status: CommandPending, BatchID: id,
		})
	}
	b.Total = len(cmds)
	for t := range tenants {
		b.TenantIDs = append(b.TenantIDs, t)
	}
	slices.Sort(b.TenantIDs)
	stored, created, err := s.store.CreateBatch(ctx, b, cmds)
	if err != nil {
		return Batch{}, false, fmt.Errorf("record batch: %w", err)
	}
	if created {
		s.log.InfoContext(ctx, "command batch recorded", "batch_id", stored.ID, "action", string(stored.Action),
			"total", stored.Total, "skipped_revoked", stored.SkippedRevoked, "skipped_not_enrolled", stored.SkippedNotEnrolled, "by", stored.CreatedBy)
		s.wakePublisher()
		// Nothing is sent before the batch is on record: every command is
		// pending, and the answer says so (done only when none is).
		stored.Counts = BatchCounts{Pending: stored.Total}
		return stored, true, nil
	}
	return s.withCounts(ctx, stored)
}

// withCounts answers a repeated batch request with the batch as it stands.
func (s *Commands) withCounts(ctx context.Context, b Batch) (Batch, bool, error) {
	cur, err := s.store.Batch(ctx, b.ID)
	if err != nil {
		return Batch{}, false, fmt.Errorf("read batch: %w", err)
	}
	return cur, false, nil
}

// BatchPreview is what a batch request would send now: the sensors named
// or matched, how many would get a command, and why the rest would not.
type BatchPreview struct {
	Matched            int
	Total              int
	SkippedRevoked     int
	SkippedNotEnrolled int
}

// PreviewBatch validates req exactly as CreateBatch does and counts its
// targets without recording anything (a sensor revoked meanwhile is
// skipped when the batch is made). The idempotency key is ignored.
func (s *Commands) PreviewBatch(ctx context.Context, req BatchRequest) (BatchPreview, error) {
	if !req.Action.Valid() {
		return BatchPreview{}, fmt.Errorf("%w: action %q (want start or stop)", ErrInvalidInput, req.Action)
	}
	if (req.Filter == nil) == (req.SensorIDs == nil) {
		return BatchPreview{}, fmt.Errorf("%w: give exactly one of sensorIds and filter", ErrInvalidInput)
	}
	ids, match, _, err := normalizeTargets(req)
	if err != nil {
		return BatchPreview{}, err
	}
	targets, err := s.resolveTargets(ctx, ids, match, req.Scope)
	if err != nil {
		return BatchPreview{}, err
	}
	p := BatchPreview{Matched: len(targets)}
	for _, t := range targets {
		switch t.State {
		case StateRevoked:
			p.SkippedRevoked++
		case StatePending:
			p.SkippedNotEnrolled++
		default:
			p.Total++
		}
	}
	return p, nil
}

// normalizeTargets validates a batch's targets: the sorted, distinct
// sensor ids, or the filter within scope; and digests the request.
func normalizeTargets(req BatchRequest) ([]string, *SensorMatch, []byte, error) {
	if req.Filter != nil {
		m := *req.Filter
		if m.Tenants != nil && len(m.Tenants) != 1 {
			return nil, nil, nil, fmt.Errorf("%w: a filter names at most one tenant", ErrInvalidInput)
		}
		filterTenant := ""
		if m.Tenants != nil {
			filterTenant = m.Tenants[0]
			if req.Scope != nil && !slices.Contains(req.Scope, filterTenant) {
				return nil, nil, nil, fmt.Errorf("tenant %s: %w", filterTenant, ErrNotFound)
			}
		} else {
			m.Tenants = req.Scope
		}
		m, err := checkMatch(m)
		if err != nil {
			return nil, nil, nil, err
		}
		parts := []string{filterTenant, string(m.State), m.Q}
		if len(m.Labels) > 0 {
			// Only then: requests before labels existed keep their digest.
			parts = append(parts, labelsString(m.Labels))
		}
		return nil, &m, requestHash(req.Action, "filter", parts), nil
	}
	if len(req.SensorIDs) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: sensorIds is empty", ErrInvalidInput)
	}
	if len(req.SensorIDs) > MaxBatchSensorIDs {
		return nil, nil, nil, fmt.Errorf("%w: at most %d sensor ids", ErrBatchTooLarge, MaxBatchSensorIDs)
	}
	ids := slices.Clone(req.SensorIDs)
	for _, id := range ids {
		if err := validateID("sensor id", id); err != nil {
			return nil, nil, nil, err
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return ids, nil, requestHash(req.Action, "ids", ids), nil
}

// resolveTargets resolves a batch's filter when it has one (match), else
// its sensor ids within scope.
func (s *Commands) resolveTargets(ctx context.Context, ids []string, match *SensorMatch, scope []string) ([]SensorTarget, error) {
	if match != nil {
		return s.matchTargets(ctx, *match)
	}
	return s.namedTargets(ctx, ids, scope)
}

// namedTargets resolves a batch's sensor ids: all must exist within scope.
func (s *Commands) namedTargets(ctx context.Context, ids, scope []string) ([]SensorTarget, error) {
	found, err := s.store.SensorTargets(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("look up sensors: %w", err)
	}
	inScope := 0
	for _, t := range found {
		if scope == nil || slices.Contains(scope, t.TenantID) {
			inScope++
		}
	}
	if inScope != len(ids) {
		// Which ones is not said: that would tell a sensor of another
		// tenant from one that does not exist.
		return nil, fmt.Errorf("%w: %d of the %d sensors do not exist or are not visible to you", ErrNotFound, len(ids)-inScope, len(ids))
	}
	sort.Slice(found, func(i, j int) bool { return found[i].ID < found[j].ID })
	return found, nil
}

// matchTargets resolves a batch's filter.
func (s *Commands) matchTargets(ctx context.Context, m SensorMatch) ([]SensorTarget, error) {
	if m.Tenants != nil && len(m.Tenants) == 0 {
		return nil, nil
	}
	found, err := s.store.MatchSensors(ctx, m, MaxBatchMatch+1)
	if err != nil {
		return nil, fmt.Errorf("match sensors: %w", err)
	}
	if len(found) > MaxBatchMatch {
		return nil, fmt.Errorf("%w: the filter matches more than %d sensors; narrow it", ErrBatchTooLarge, MaxBatchMatch)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].ID < found[j].ID })
	return found, nil
}

func requestHash(a Action, kind string, parts []string) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", a, kind, strings.Join(parts, "\x00"))
	return h.Sum(nil)
}

// Batch returns a batch with its counts.
func (s *Commands) Batch(ctx context.Context, id string) (Batch, error) {
	if err := validateBatchID(id); err != nil {
		return Batch{}, err
	}
	return s.store.Batch(ctx, id)
}

func validateBatchID(id string) error {
	if err := validateID("batch id", id); err != nil {
		return fmt.Errorf("batch %s: %w", id, ErrNotFound)
	}
	return nil
}

// wakePublisher tells this replica's publisher loop there is work.
func (s *Commands) wakePublisher() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// PublisherWake is signalled when this replica recorded a batch.
func (s *Commands) PublisherWake() <-chan struct{} { return s.wake }

// PublishQueued publishes batch commands no replica has sent yet, a claim
// of batchClaim at a time with at most the configured concurrency, until
// none is left or ctx ends (the claim in hand is finished first). Each
// command is settled like a command to one sensor: accepted when the
// stream acknowledged it, failed when it provably did not reach the
// stream, pending otherwise (ReconcileCommands republishes it with the
// same message id). A replica that dies mid-claim leaves its commands
// pending with their first send recorded: the reconciliation of any replica
// takes them over. It returns how many it published.
func (s *Commands) PublishQueued(ctx context.Context) (int, error) {
	sent := 0
	// The stream's answers of one claim are recorded while the next claim
	// is taken and published; at most one recording runs at a time.
	var recording sync.WaitGroup
	defer recording.Wait()
	// The next claim is taken while this one is published (one claim
	// ahead, never more): the publisher does not stop for the claim's
	// round trip between claims. A claim taken is published even when ctx
	// ends meanwhile.
	type claim struct {
		cmds []Command
		err  error
	}
	next := make(chan claim, 1)
	take := func() {
		cmds, err := s.store.ClaimUnsentCommands(ctx, s.now(), batchClaim)
		next <- claim{cmds, err}
	}
	go take()
	for {
		c := <-next // no claim is being taken past this point
		if c.err != nil {
			return sent, fmt.Errorf("claim queued commands: %w", c.err)
		}
		if len(c.cmds) == 0 {
			return sent, nil
		}
		more := ctx.Err() == nil
		if more {
			go take()
		}
		// A claimed command is sent, and its outcome recorded, even when
		// ctx ends meanwhile: its first publication is on record.
		wctx := context.WithoutCancel(ctx)
		results := s.publishClaimed(wctx, c.cmds)
		recording.Wait()
		recording.Go(func() { s.recordPublished(wctx, c.cmds, results) })
		sent += len(c.cmds)
		if !more {
			return sent, nil
		}
	}
}

// publishClaimed publishes claimed commands, pipelined when the publisher
// can, and returns each one's outcome.
func (s *Commands) publishClaimed(ctx context.Context, cmds []Command) []PublishResult {
	if bp, ok := s.publisher.(CommandBatchPublisher); ok {
		got := bp.PublishCommands(ctx, cmds, s.batchConcurrency)
		if len(got) == len(cmds) {
			return got
		}
		// Not an answer per command: none is known stored.
		results := make([]PublishResult, len(cmds))
		for i := range results {
			results[i].Err = fmt.Errorf("%w: %d outcomes for %d commands", ErrPublishUnknown, len(got), len(cmds))
		}
		return results
	}
	results := make([]PublishResult, len(cmds))
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.batchConcurrency)
	for i, c := range cmds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := &results[i]
			r.Ack, r.Err = s.publisher.PublishCommand(ctx, c)
		})
	}
	wg.Wait()
	return results
}

// recordPublished records what the stream answered for claimed commands:
// stored ones accepted, provably unsent ones failed, the rest left pending
// for the reconciliation.
func (s *Commands) recordPublished(ctx context.Context, cmds []Command, results []PublishResult) {
	at := s.now()
	var (
		acks   []CommandAck
		failed []string
		unsure int
	)
	for i, r := range results {
		switch {
		case r.Err == nil:
			acks = append(acks, CommandAck{ID: cmds[i].ID, Seq: r.Ack.Sequence, At: at})
		case errors.Is(r.Err, ErrNotPublished):
			failed = append(failed, cmds[i].ID)
		default:
			unsure++
		}
	}
	if len(acks) > 0 {
		if err := s.store.AcceptCommands(ctx, acks); err != nil {
			// Stored in the stream: the reconciliation or the sensors'
			// reports catch the records up.
			s.log.ErrorContext(ctx, "record accepted batch commands", "count", len(acks), logkey.Error, err)
		}
	}
	if len(failed) > 0 {
		if err := s.store.FailCommands(ctx, failed, at); err != nil {
			s.log.ErrorContext(ctx, "mark batch commands failed", "count", len(failed), logkey.Error, err)
		}
	}
	if len(failed) > 0 || unsure > 0 {
		s.log.WarnContext(ctx, "batch commands not all stored", "accepted", len(acks), "failed", len(failed), "unconfirmed", unsure)
	}
}

// BatchQuery is one page of the batch listing as stores see it.
type BatchQuery struct {
	// Tenants is the reader's scope (nil: every tenant, an admin): a batch
	// is listed when every tenant it touched is in scope and it touched one
	// at least, or it touched none and OperatorID made it.
	Tenants    []string
	OperatorID string
	// After is the position the page starts after (CreatedAt in Time, the
	// batch id in ID); nil for the first page.
	After *SensorKey
	Limit int
}

// BatchLister pages batches, newest first.
type BatchLister interface {
	// ListBatches returns at most q.Limit batches visible within q, newest
	// first (creation time, then id, both descending), strictly after
	// q.After, each with its counts.
	ListBatches(ctx context.Context, q BatchQuery) ([]Batch, error)
}

// Bounds of the batch listing.
const (
	DefaultBatchPage = 50
	MaxBatchPage     = 200
)

// BatchListing is a request for one page of batches.
type BatchListing struct {
	// Tenants is the reader's scope (nil: every tenant).
	Tenants    []string
	OperatorID string
	Limit      int
	// Cursor is the previous page's NextCursor; "" for the first page.
	Cursor string
}

// BatchPage is one page of batches; NextCursor is "" on the last page.
type BatchPage struct {
	Items      []Batch
	NextCursor string
}

// ListBatches returns one page of the batches the reader may see, newest
// first. Its cursors are bound to the scope like the sensor listing's.
func (s *Commands) ListBatches(ctx context.Context, l BatchListing) (BatchPage, error) {
	limit, err := pageLimit(l.Limit, DefaultBatchPage, MaxBatchPage)
	if err != nil {
		return BatchPage{}, err
	}
	m, err := checkMatch(SensorMatch{Tenants: l.Tenants})
	if err != nil {
		return BatchPage{}, err
	}
	binding := bindingOf("batches", SensorMatch{Tenants: m.Tenants, Q: l.OperatorID})
	items, next, err := keysetPage(l.Cursor, SortCreatedAtDesc, binding, limit, func(after *SensorKey, n int) ([]Batch, error) {
		items, err := s.store.ListBatches(ctx, BatchQuery{Tenants: m.Tenants, OperatorID: l.OperatorID, After: after, Limit: n})
		if err != nil {
			return nil, fmt.Errorf("list batches: %w", err)
		}
		return items, nil
	}, func(b Batch) SensorKey { return SensorKey{Time: b.CreatedAt, ID: b.ID} })
	if err != nil {
		return BatchPage{}, err
	}
	return BatchPage{Items: items, NextCursor: next}, nil
}

// BatchVisible reports whether a reader of scope tenants (nil: every
// tenant) who is operatorID sees b: the reference of what stores select.
func BatchVisible(b Batch, tenants []string, operatorID string) bool {
	if tenants == nil {
		return true
	}
	if len(b.TenantIDs) == 0 {
		return b.OperatorID == operatorID
	}
	return !slices.ContainsFunc(b.TenantIDs, func(t string) bool { return !slices.Contains(tenants, t) })
}

// BatchAfter reports whether a comes after position k in the newest-first
// order: older, or as old with a smaller id.
func BatchAfter(a Batch, k SensorKey) bool {
	if c := a.CreatedAt.Compare(k.Time); c != 0 {
		return c < 0
	}
	return a.ID < k.ID
}
