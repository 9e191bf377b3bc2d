package fleettest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/fleet"
)

// testHistoryRetention drives the fleet's history past its bound
// (fleet.HistoryStore): old finished commands, batches whose commands all
// finished, ended tokens and claim codes go, in steps of at most the limit;
// the recent and everything live stay (pending commands, a batch with an
// unfinished command, each sensor's last and named command and the batch
// holding it, live tokens, unredeemed unexpired codes); a second pass
// removes nothing; and the listings answer truthfully afterwards. Each
// check of what stays is a subtest on the one pruned history.
func testHistoryRetention(t *testing.T, s Store) {
	ctx, cut := pastHistory(t, s)
	// commands: c-failed, c-expired, c-applied, c2-old; batches: b-done
	// (2 commands) and b-empty; tokens: 3 used enrolment tokens, p1's
	// expired one, s2's replaced sensor token; codes: 5 redeemed, 2 ended.
	if got, want := prunePass(t, s, ctx, cut), [5]int{4, 2, 5, 7, 2}; got != want {
		t.Errorf("first pass removed [commands batches tokens codes batch-commands] %v, want %v", got, want)
	}
	if got := prunePass(t, s, ctx, cut); got != [5]int{} {
		t.Errorf("second pass removed %v, want nothing", got)
	}

	// What stays answers as before.
	t.Run("commands", func(t *testing.T) {
		for sensor, want := range map[string][]string{
			"s1": {"b-live-s1", "c-last", "c-pending"},
			"s2": {"b-live-s2", "c2-recent"},
			"s3": {"b-last-s3", "c3-named"},
		} {
			page, err := s.SensorCommands(ctx, sensor, fleet.CommandCursor{}, 50)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, sortedIDs(page, commandID)); diff != "" {
				t.Errorf("%s's commands after pruning (-want +got):\n%s", sensor, diff)
			}
		}
	})
	t.Run("last commands", func(t *testing.T) {
		for sensor, want := range map[string]string{"s1": "c-last", "s2": "c2-recent", "s3": "b-last-s3"} {
			if sn, err := s.Sensor(ctx, sensor); err != nil || sn.LastCommand == nil || sn.LastCommand.ID != want {
				t.Errorf("%s's last command %+v, %v; want %s", sensor, sn.LastCommand, err, want)
			}
		}
	})
	t.Run("batches", func(t *testing.T) {
		bs, err := s.ListBatches(ctx, fleet.BatchQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"b-recent", "b-live", "b-last"}, idsOf(bs, batchID)); diff != "" {
			t.Errorf("batches after pruning (-want +got):\n%s", diff)
		}
		if b, err := s.Batch(ctx, "b-live"); err != nil || b.Total != 2 || b.Counts.Pending != 1 || b.Counts.Failed != 1 {
			t.Errorf("b-live = %+v, %v; want 1 pending and 1 failed of 2", b, err)
		}
		if _, err := s.Batch(ctx, "b-done"); !errors.Is(err, fleet.ErrNotFound) {
			t.Errorf("b-done after pruning: %v, want ErrNotFound", err)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		for _, tc := range []struct {
			sensor string
			kind   fleet.TokenKind
			hash   []byte
		}{
			{"s1", fleet.TokenSensor, hash("token b1")}, {"s2", fleet.TokenSensor, hash("token b2")},
			{"s3", fleet.TokenSensor, hash("sensor s3")}, {"p2", fleet.TokenEnrollment, hash("enrol p2")},
		} {
			if tok, err := s.LiveToken(ctx, tc.sensor, tc.kind); err != nil || !cmp.Equal(tok.Hash, tc.hash) {
				t.Errorf("%s's live %s token = %x, %v; want %x", tc.sensor, tc.kind, tok.Hash, err, tc.hash)
			}
		}
		// A renewal's answer sent again is recognised by the active
		// certificate's record, which pruning leaves alone.
		if r, err := s.ActiveRenewal(ctx, "s2"); err != nil || !cmp.Equal(r.ProvenTokenHash, hash("sensor s2")) {
			t.Errorf("s2's active renewal after pruning = %+v, %v", r, err)
		}
	})
	t.Run("claim codes", func(t *testing.T) {
		codes, err := s.ClaimCodes(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"cc-live", "cc-revoked-recent"}, sortedIDs(codes, claimCodeID)); diff != "" {
			t.Errorf("claim codes after pruning (-want +got):\n%s", diff)
		}
		if _, err := s.Redeem(ctx, fleet.RedeemRecord{CodeHash: hash("code cc-live"), SensorID: "s9", Hostname: "s9",
			TokenHash: hash("enrol s9"), TokenExpiresAt: cut.Add(2 * time.Hour), At: cut.Add(time.Minute)}); err != nil {
			t.Errorf("redeem the live code after pruning: %v", err)
		}
	})
}

// prunePass prunes the history at cut in steps of at most 2, each kind
// until a step removes fewer than 2, and answers how many of [commands
// batches tokens codes batch-commands] it removed.
func prunePass(t *testing.T, s Store, ctx context.Context, cut time.Time) [5]int {
	t.Helper()
	steps := func(what string, fn func() (int, error)) int {
		t.Helper()
		total := 0
		for range 100 {
			n, err := fn()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if n > 2 {
				t.Fatalf("%s removed %d in one step, limit 2", what, n)
			}
			total += n
			if n < 2 {
				return total
			}
		}
		t.Fatalf("%s never finished", what)
		return 0
	}
	var removed [5]int
	removed[0] = steps("commands", func() (int, error) { return s.PruneCommands(ctx, cut, 2) })
	removed[1] = steps("batches", func() (int, error) {
		b, c, err := s.PruneBatches(ctx, cut, 2)
		removed[4] += c
		return b, err
	})
	removed[2] = steps("tokens", func() (int, error) { return s.PruneTokens(ctx, cut, 2) })
	removed[3] = steps("claim codes", func() (int, error) { return s.PruneClaimCodes(ctx, cut, 2) })
	return removed
}

// pastHistory is testHistoryRetention's set-up: tenant acme with sensors
// s1–s3, their commands and batches, tokens and claim codes, old and
// recent, finished and live, around the cut-off it answers.
func pastHistory(t *testing.T, s Store) (context.Context, time.Time) {
	t.Helper()
	ctx := seed(t, s, []string{"acme"},
		sensorIn{"acme", "s1", "a1"}, sensorIn{"acme", "s2", "a2"}, sensorIn{"acme", "s3", "a3"})
	cut := t0.Add(90 * 24 * time.Hour)
	single := func(id, sensor string, issued, expires time.Time) {
		t.Helper()
		c := fleet.Command{ID: id, TenantID: "acme", SensorID: sensor, Action: fleet.ActionStop, IssuedAt: issued, IssuedBy: "ops", ExpiresAt: expires}
		if _, _, err := s.CreateCommand(ctx, c); err != nil {
			t.Fatalf("command %s: %v", id, err)
		}
	}
	batch := func(id string, at time.Time, sensors ...string) {
		t.Helper()
		cmds := batchCommands(id, sensors...)
		b := batchOf(id, "", hash(id), cmds)
		b.CreatedAt = at
		if _, _, err := s.CreateBatch(ctx, b, cmds); err != nil {
			t.Fatalf("batch %s: %v", id, err)
		}
	}
	fail := func(ids ...string) {
		t.Helper()
		is(t, "fail", s.FailCommands(ctx, ids, t0.Add(time.Minute)), nil)
	}

	// Batches first, so that the single commands after them are the
	// sensors' last.
	batch("b-done", t0, "s1", "s2")
	fail("b-done-s1", "b-done-s2")
	batch("b-live", t0, "s1", "s2") // b-live-s2 is never sent: pending
	fail("b-live-s1")
	batch("b-empty", t0)
	single("c-failed", "s1", t0, t0.Add(10*time.Minute))
	fail("c-failed")
	single("c-expired", "s1", t0.Add(time.Second), t0.Add(time.Minute))
	if n, err := s.ExpireCommands(ctx, t0.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expire = %d, %v; want c-expired alone", n, err)
	}
	single("c-applied", "s1", t0.Add(2*time.Second), t0.Add(10*time.Minute))
	is(t, "accept", s.AcceptCommand(ctx, "c-applied", 1, t0.Add(3*time.Second)), nil)
	if _, err := update(s, "acme", "s1", func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
		cur.Results, cur.AcknowledgedAt = []fleet.CommandResult{{CommandID: "c-applied", Outcome: fleet.OutcomeApplied}}, t0.Add(4*time.Second)
		return cur, true
	}); err != nil {
		t.Fatal(err)
	}
	single("c-pending", "s1", t0.Add(3*time.Second), cut.Add(time.Hour)) // live however old
	single("c-last", "s1", t0.Add(4*time.Second), t0.Add(10*time.Minute))
	fail("c-last")
	single("c2-old", "s2", t0, t0.Add(10*time.Minute))
	fail("c2-old")
	single("c2-recent", "s2", cut.Add(time.Minute), cut.Add(11*time.Minute))
	fail("c2-recent")
	// s3: its named command (the last one to it alone), then a batch
	// holding its last command: both stay, the batch whole.
	single("c3-named", "s3", t0, t0.Add(10*time.Minute))
	fail("c3-named")
	batch("b-last", t0, "s3")
	fail("b-last-s3")
	batch("b-recent", cut.Add(time.Minute))

	// Tokens: the three enrolment tokens were used at t0+1m; s2's first
	// sensor token is replaced by a renewal long before the cut-off, s1's
	// after it; p1's enrolment token expired unused; p2's is live.
	renew := func(sensor, replaces, serial string, at time.Time) {
		t.Helper()
		c := fleet.IssuedCertificate{Serial: serial, NotBefore: at, NotAfter: cut.Add(168 * time.Hour)}
		is(t, "renew "+sensor, s.RenewCertificate(ctx, fleet.RenewalRecord{
			SensorID: sensor, ReplacesSerial: replaces, Certificate: c, CSRSHA256: hash("csr " + serial),
			ProvenSerial: replaces, ProvenTokenHash: hash("sensor " + sensor), ProvenSignedAt: at,
			SensorTokenHash: hash("token " + serial), SensorTokenExpiresAt: c.NotAfter, At: at,
		}), nil)
	}
	renew("s2", "a2", "b2", t0.Add(2*time.Hour))
	renew("s1", "a1", "b1", cut.Add(time.Hour))
	pending(t, s, "acme", "p1") // enrolment token expires at t0+15m
	code(t, s, "acme", "cc-p2", "")
	if _, err := s.Redeem(ctx, fleet.RedeemRecord{CodeHash: hash("code cc-p2"), SensorID: "p2", Hostname: "p2",
		TokenHash: hash("enrol p2"), TokenExpiresAt: cut.Add(time.Hour), At: t0}); err != nil {
		t.Fatal(err)
	}

	// Claim codes: cc-s1…cc-p2 were redeemed at t0; besides them one
	// revoked and one expired long ago, one live, one revoked recently.
	claim := func(id string, expires time.Time) {
		t.Helper()
		c := fleet.ClaimCode{ID: id, TenantID: "acme", CreatedAt: t0, ExpiresAt: expires, CreatedBy: "ops"}
		if err := s.CreateClaimCode(ctx, c, hash("code "+id)); err != nil {
			t.Fatal(err)
		}
	}
	claim("cc-revoked-old", cut.Add(time.Hour))
	is(t, "revoke code", s.RevokeClaimCode(ctx, "cc-revoked-old", t0.Add(time.Hour)), nil)
	claim("cc-expired-old", t0.Add(time.Hour))
	claim("cc-live", cut.Add(time.Hour))
	claim("cc-revoked-recent", cut.Add(2*time.Hour))
	is(t, "revoke code", s.RevokeClaimCode(ctx, "cc-revoked-recent", cut.Add(time.Minute)), nil)
	return ctx, cut
}
