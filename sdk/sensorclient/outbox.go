package sensorclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"time"

	"github.com/rxc-project/rxc/sdk/sensorwire"
)

// Bounds of the result outbox.
const (
	// MaxOutbox is the most results an outbox keeps, confirmed ones (kept
	// as ids until their command expires) included. At the cap, adding a
	// result first forgets the oldest confirmed one, then the oldest
	// unconfirmed one: that outcome is lost, and Add says which.
	MaxOutbox = 4096
	// MaxUnconfirmedAge is how long a result waits for the control plane's
	// confirmation: one older is forgotten (lost) — a control plane silent
	// that long is not coming back for it.
	MaxUnconfirmedAge = 7 * 24 * time.Hour
	// keepWithoutExpiry is how long a confirmed result of a command whose
	// expiry is unknown (a malformed one) is remembered.
	keepWithoutExpiry = time.Hour
	// expirySkew is how long past its expiresAt a confirmed command is
	// still remembered, in case the clocks disagree.
	expirySkew = time.Minute
	// maxConfirmationBytes bounds a confirmation message.
	maxConfirmationBytes = sensorwire.MaxConfirmationBytes
)

// outboxEntry is one result in the outbox file: the result itself (so a
// file written by an agent before the outbox, a plain list of results,
// loads as unconfirmed entries), its command's expiry, and when the
// control plane confirmed it. A confirmed entry keeps only the id.
type outboxEntry struct {
	CommandResult
	ExpiresAt   time.Time `json:"expiresAt,omitzero"`
	ConfirmedAt time.Time `json:"confirmedAt,omitzero"`
	// sent is when the entry was last put in a report (not persisted).
	sent time.Time
}

func (e outboxEntry) confirmed() bool { return !e.ConfirmedAt.IsZero() }

// forgetAt is when a confirmed entry is no longer needed: after its
// command's expiry a redelivery is refused as expired anyway.
func (e outboxEntry) forgetAt() time.Time {
	if e.ExpiresAt.IsZero() {
		return e.ConfirmedAt.Add(keepWithoutExpiry)
	}
	return e.ExpiresAt.Add(expirySkew)
}

// Outbox keeps every command result until the control plane confirms it
// recorded it (Confirm), on disk in the state directory (ResultsFile, mode
// 0600), so neither a database outage nor an agent restart loses one. A
// confirmed result is remembered by its id until its command expires, so a
// redelivered command is recognised and not applied twice. Safe for
// concurrent use.
type Outbox struct {
	dir *StateDir
	now func() time.Time

	mu      sync.Mutex
	entries []outboxEntry // in the order added
}

// OpenOutbox loads the outbox of the state directory; a missing file is an
// empty outbox. A file that cannot be read gives an empty outbox and the
// error (the caller decides whether to go on without it).
func (d *StateDir) OpenOutbox(now func() time.Time) (*Outbox, error) {
	if now == nil {
		now = time.Now
	}
	o := &Outbox{dir: d, now: now}
	data, err := d.readSecret(ResultsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return o, nil
	}
	if err != nil {
		return o, err
	}
	var entries []outboxEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return o, fmt.Errorf("%s: %w", ResultsFile, err)
	}
	for _, e := range entries {
		if idPattern.MatchString(e.CommandID) && !o.has(e.CommandID) {
			o.entries = append(o.entries, e)
		}
	}
	return o, nil
}

// Has reports whether the outbox holds a result for command id, confirmed
// or not.
func (o *Outbox) Has(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.has(id)
}

func (o *Outbox) has(id string) bool {
	return slices.ContainsFunc(o.entries, func(e outboxEntry) bool { return e.CommandID == id })
}

// Add keeps r, the result of a command expiring at expiresAt (zero when
// unknown), and saves the outbox. A result for a command already held is
// not added (added false). lost names the results forgotten to make room
// or for age (see MaxOutbox, MaxUnconfirmedAge). The result is kept in
// memory even when saving fails (err).
func (o *Outbox) Add(r CommandResult, expiresAt time.Time) (added bool, lost []string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.has(r.CommandID) {
		return false, nil, nil
	}
	lost = o.prune(o.now())
	for len(o.entries) >= MaxOutbox {
		i := slices.IndexFunc(o.entries, outboxEntry.confirmed)
		if i < 0 {
			i = 0
			lost = append(lost, o.entries[0].CommandID)
		}
		o.entries = slices.Delete(o.entries, i, i+1)
	}
	o.entries = append(o.entries, outboxEntry{CommandResult: r, ExpiresAt: expiresAt})
	return true, lost, o.save()
}

// Due returns up to n unconfirmed results for a report: those reported
// least recently first (never reported ones first), oldest first among
// equals, so every result is reported again in turn until confirmed, even
// by a control plane that never confirms.
func (o *Outbox) Due(n int) []CommandResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	var idx []int
	for i, e := range o.entries {
		if !e.confirmed() {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return o.entries[a].sent.Compare(o.entries[b].sent) })
	if len(idx) > n {
		idx = idx[:n]
	}
	slices.Sort(idx)
	now := o.now()
	out := make([]CommandResult, 0, len(idx))
	for _, i := range idx {
		o.entries[i].sent = now
		out = append(out, o.entries[i].CommandResult)
	}
	return out
}

// Unconfirmed is how many results wait for the control plane.
func (o *Outbox) Unconfirmed() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, e := range o.entries {
		if !e.confirmed() {
			n++
		}
	}
	return n
}

// Confirm marks the results ids names as recorded by the control plane and
// saves the outbox when that changed anything; it returns how many were
// newly confirmed. Ids it does not hold, or holds confirmed, are ignored
// (confirmations are idempotent).
func (o *Outbox) Confirm(ids []string) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	n := 0
	for _, id := range ids {
		i := slices.IndexFunc(o.entries, func(e outboxEntry) bool { return e.CommandID == id })
		if i < 0 || o.entries[i].confirmed() {
			continue
		}
		e := &o.entries[i]
		e.ConfirmedAt = now
		e.CommandResult = CommandResult{CommandID: e.CommandID, Outcome: e.Outcome, At: e.At}
		n++
	}
	lost := o.prune(now)
	if n == 0 && len(lost) == 0 {
		return 0, nil
	}
	return n, o.save()
}

// prune forgets confirmed entries no longer needed and unconfirmed ones
// older than MaxUnconfirmedAge (returned: their outcomes are lost).
func (o *Outbox) prune(now time.Time) (lost []string) {
	o.entries = slices.DeleteFunc(o.entries, func(e outboxEntry) bool {
		switch {
		case e.confirmed():
			return !now.Before(e.forgetAt())
		case now.Sub(e.At) > MaxUnconfirmedAge:
			lost = append(lost, e.CommandID)
			return true
		}
		return false
	})
	return lost
}

func (o *Outbox) save() error {
	data, err := json.Marshal(o.entries)
	if err != nil {
		return err
	}
	return writeAtomic(o.dir.file(ResultsFile), data)
}

// Confirmation is the control plane's answer to a status report that
// carried results: the ids of those it has recorded (or will never record:
// they name no command of this sensor), sent only once they are durable.
// TenantID and SensorID name the sensor whose report it answers.
type Confirmation = sensorwire.Confirmation

// decodeConfirmation parses a confirmation for tenantID/sensorID
// (sensorwire.DecodeConfirmation); one naming another sensor is refused
// (another sensor of the tenant can point its report's reply subject at
// this sensor's inbox).
func decodeConfirmation(data []byte, tenantID, sensorID string) (Confirmation, error) {
	c, err := sensorwire.DecodeConfirmation(data)
	if err != nil {
		return Confirmation{}, fmt.Errorf("confirmation: %w", err)
	}
	if c.TenantID != tenantID || c.SensorID != sensorID {
		return Confirmation{}, fmt.Errorf("confirmation for %s/%s, not this sensor", truncate(c.TenantID, 64), truncate(c.SensorID, 64))
	}
	return c, nil
}
