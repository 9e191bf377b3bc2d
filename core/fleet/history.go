package fleet

import (
	"context"
	"time"
)

// History retention: what of the fleet's history may be deleted once it is
// older than the retention the operator set (core/retention runs the pass).
// The rules are here; the stores implement them, and the contract suite
// (fleettest) holds both stores to them. Nothing live is ever deleted:
//
//   - A command is finished (CommandFinished) when it failed, expired, or
//     was reported on by its sensor. A pending command, or one the stream
//     accepted that its sensor has not reported on, is live.
//   - A command outside any batch is old when it was issued and expired
//     before the cut-off; it is deleted when it is finished and old and is
//     neither its sensor's last command (the one recorded last, which the
//     sensor's view shows) nor the one the sensor row names.
//   - A batch is deleted together with all its commands, or not at all
//     (its counts are read from its commands, so a batch is never shown
//     with wrong counts): when it was created before the cut-off and every
//     command of it is finished, old and not its sensor's last command.
//   - A sensor token or enrolment token is deleted once it ended (used,
//     revoked or expired: TokenEnded) before the cut-off. Nothing reads an
//     ended token: authentication finds live tokens only, and a renewal
//     sent again for a lost answer is recognised by what the active
//     certificate's row keeps (ActiveRenewal), not by the token's row.
//   - A claim code is deleted once it ended (redeemed, revoked or expired:
//     ClaimCodeEnded) before the cut-off. An unredeemed code that has not
//     expired is live.
//
// Each call deletes at most limit rows (commands, tokens, codes) or
// batches, in short transactions, so a pass over a large backlog never
// holds locks for long; it returns how many it deleted, and the caller
// calls again while a call deleted its full limit. Calls are idempotent and
// safe to run concurrently (two replicas) or to interrupt.
type HistoryStore interface {
	PruneCommands(ctx context.Context, before time.Time, limit int) (int, error)
	// PruneBatches deletes up to limit batches with their commands and
	// returns the batches and the commands deleted.
	PruneBatches(ctx context.Context, before time.Time, limit int) (batches, commands int, err error)
	PruneTokens(ctx context.Context, before time.Time, limit int) (int, error)
	PruneClaimCodes(ctx context.Context, before time.Time, limit int) (int, error)
}

// CommandFinished reports whether c will change no more on its own: it
// failed, expired, or its sensor reported on it. (An expired command may
// still take a late report, which makes it accepted and keeps it
// finished.)
func CommandFinished(c Command) bool {
	switch {
	case c.Status == CommandFailed, c.Status == CommandExpired:
		return true
	case c.Status == CommandAccepted && !c.AcknowledgedAt.IsZero():
		return true
	}
	return false
}

// CommandPrunable reports whether c, as far as its own record goes, may be
// deleted at cut-off before: finished, issued and expired before it. The
// store adds what it alone knows: whether c is its sensor's last command.
func CommandPrunable(c Command, before time.Time) bool {
	return CommandFinished(c) && c.IssuedAt.Before(before) && c.ExpiresAt.Before(before)
}

// ended is the earliest of the set times: when a token or code stopped
// being usable (zero while none is set).
func ended(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// TokenEnded is when a token stopped being usable: the first of its use,
// its revocation and its expiry (zero while it is live and has no expiry).
func TokenEnded(usedAt, revokedAt, expiresAt time.Time) time.Time {
	return ended(usedAt, revokedAt, expiresAt)
}

// ClaimCodeEnded is when c stopped being redeemable: the first of its
// redemption, its revocation and its expiry.
func ClaimCodeEnded(c ClaimCode) time.Time {
	return ended(c.UsedAt, c.RevokedAt, c.ExpiresAt)
}
