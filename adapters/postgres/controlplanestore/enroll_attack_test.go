package controlplanestore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxc-project/rxc/adapters/postgres/controlplanestore"
	"github.com/rxc-project/rxc/adapters/postgres/pgstoretest"
	"github.com/rxc-project/rxc/core/fleet"
)

// Attacks on enrolment (CompleteEnrollment is one statement): one
// enrolment token used at once through two replicas, a token used for
// another tenant's sensor, a replay after success, and enrolment racing
// the sensor's revocation. Each asserts what every caller was told and
// what the database holds, next to a positive control.

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Attack: a stolen enrolment token sent many times at once, half through
// each of two replicas, each with its own key. Exactly one caller gets a
// certificate; it is the sensor's only certificate, its sensor token the
// only live one, and every other caller is told invalid_token. A replay
// of the token afterwards changes nothing.
func TestAttackEnrolmentRaceAcrossReplicas(t *testing.T) {
	t.Parallel()
	r := newRealFleet(t)
	other := r.replica(t)
	r.provisionedTenant(t, "acme")
	for round := range 4 {
		red := r.redeemed(t, "acme")
		const n = 8
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []fleet.Enrollment
			errs []error
		)
		for i := range n {
			svc := r.svc
			if i%2 == 1 {
				svc = other
			}
			_, csr := newKeyCSR(t)
			wg.Go(func() {
				e, err := svc.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					wins = append(wins, e)
				} else {
					errs = append(errs, err)
				}
			})
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: BROKEN: %d enrolments succeeded with one token, want 1 (errors %v)", round, len(wins), errs)
		}
		for _, err := range errs {
			if !errors.Is(err, fleet.ErrInvalidToken) {
				t.Errorf("round %d: a losing caller was told %v, want invalid token", round, err)
			}
		}
		win := wins[0]
		if got := r.activeSerial(t, red.SensorID); got != win.Certificate.Serial {
			t.Fatalf("round %d: active certificate %s, the winner was given %s", round, got, win.Certificate.Serial)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 1 {
			t.Fatalf("round %d: BROKEN: %d certificates stored", round, n)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor' AND revoked_at IS NULL AND token_hash = $2`,
			red.SensorID, tokenHash(win.SensorToken)); n != 1 {
			t.Fatalf("round %d: the winner's sensor token is not the live one", round)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor'`, red.SensorID); n != 1 {
			t.Fatalf("round %d: BROKEN: %d sensor tokens stored", round, n)
		}
		if err := r.svc.AuthorizeSensor(r.ctx, "acme", red.SensorID, win.Certificate.Serial); err != nil {
			t.Fatalf("round %d: the winner's certificate does not authorise: %v", round, err)
		}

		_, csr := newKeyCSR(t)
		_, err := other.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr)
		wantErr(t, err, fleet.ErrInvalidToken)
		if got := r.activeSerial(t, red.SensorID); got != win.Certificate.Serial {
			t.Fatalf("round %d: a replay replaced the certificate: %s", round, got)
		}
	}
}

// Attack: a sensor's enrolment token presented for another sensor, of the
// same tenant and of another tenant, in both directions. Each is refused
// as invalid_token and writes nothing (the token stays usable, the target
// stays pending); positive control: each token enrols its own sensor.
func TestAttackEnrolmentWithAnotherSensorsToken(t *testing.T) {
	t.Parallel()
	r := acmeRealFleet(t)
	r.provisionedTenant(t, "globex")
	a, a2, g := r.redeemed(t, "acme"), r.redeemed(t, "acme"), r.redeemed(t, "globex")
	for _, c := range []struct {
		name          string
		sensor, token string
	}{
		{"acme's token for globex's sensor", g.SensorID, a.EnrollmentToken},
		{"globex's token for acme's sensor", a.SensorID, g.EnrollmentToken},
		{"a token for another sensor of the tenant", a2.SensorID, a.EnrollmentToken},
	} {
		_, csr := newKeyCSR(t)
		_, err := r.svc.Enroll(r.ctx, c.sensor, c.token, csr)
		if !errors.Is(err, fleet.ErrInvalidToken) {
			t.Errorf("%s: %v, want invalid token", c.name, err)
		}
	}
	if n := r.count(t, `SELECT count(*) FROM sensor_certificates`); n != 0 {
		t.Fatalf("BROKEN: %d certificates stored by refused enrolments", n)
	}
	if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE kind = 'enrollment' AND used_at IS NULL`); n != 3 {
		t.Fatalf("%d unused enrolment tokens, want 3: a refusal consumed one", n)
	}
	for _, red := range []fleet.Redemption{a, a2, g} {
		if st := r.sensor(t, red.SensorID).State; st != fleet.StatePending {
			t.Errorf("sensor %s is %s after refusals, want pending", red.SensorID, st)
		}
		_, csr := newKeyCSR(t)
		if _, err := r.svc.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr); err != nil {
			t.Errorf("positive control: sensor %s with its own token: %v", red.SensorID, err)
		}
	}
}

// Enrolment racing the sensor's revocation on another replica: whichever
// wins, the sensor ends revoked with no active certificate and no live
// token; an enrolment that lost is told it is revoked and stored nothing.
func TestEnrolmentRacingRevocation(t *testing.T) {
	t.Parallel()
	r := newRealFleet(t)
	other := r.replica(t)
	r.provisionedTenant(t, "acme")
	enrolledFirst, revokedFirst := 0, 0
	for round := range 12 {
		red := r.redeemed(t, "acme")
		_, csr := newKeyCSR(t)
		var (
			wg        sync.WaitGroup
			enrolErr  error
			revokeErr error
		)
		wg.Go(func() { _, enrolErr = r.svc.Enroll(r.ctx, red.SensorID, red.EnrollmentToken, csr) })
		wg.Go(func() { revokeErr = other.RevokeSensor(r.ctx, red.SensorID, "ops@example.com") })
		wg.Wait()
		if revokeErr != nil {
			t.Fatalf("round %d: revoke: %v", round, revokeErr)
		}
		switch {
		case enrolErr == nil:
			enrolledFirst++
			if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 1 {
				t.Fatalf("round %d: %d certificates of an enrolment that won", round, n)
			}
		case errors.Is(enrolErr, fleet.ErrRevoked):
			revokedFirst++
			if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 0 {
				t.Fatalf("round %d: BROKEN: an enrolment refused as revoked stored %d certificates", round, n)
			}
			if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor'`, red.SensorID); n != 0 {
				t.Fatalf("round %d: BROKEN: an enrolment refused as revoked stored %d sensor tokens", round, n)
			}
		default:
			t.Fatalf("round %d: enrol: %v, want success or revoked", round, enrolErr)
		}
		if st := r.sensor(t, red.SensorID).State; st != fleet.StateRevoked {
			t.Fatalf("round %d: sensor is %s after its revocation", round, st)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1 AND active`, red.SensorID); n != 0 {
			t.Fatalf("round %d: BROKEN: a revoked sensor keeps an active certificate", round)
		}
		if n := r.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND used_at IS NULL AND revoked_at IS NULL`, red.SensorID); n != 0 {
			t.Fatalf("round %d: BROKEN: a revoked sensor keeps %d live tokens", round, n)
		}
	}
	t.Logf("enrolment first %d times, revocation first %d times", enrolledFirst, revokedFirst)
}

// The enrolment statement finds every row it reads or changes through an
// index: with sequential scans disabled, PostgreSQL still plans one only
// where no index serves (as the revocation of the old sensor token once
// did, reading the whole sensor_tokens table on every enrolment).
func TestEnrolmentStatementUsesIndexes(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	red := f.redeemed(t, "acme")
	tx, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(f.ctx) }()
	if _, err := tx.Exec(f.ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var plan string
	if err := tx.QueryRow(f.ctx, `EXPLAIN (FORMAT JSON) `+controlplanestore.CompleteEnrollmentSQL,
		red.SensorID, tokenHash(red.EnrollmentToken), now, "ab01", now.Add(time.Hour), tokenHash("sensor"), now.Add(time.Hour),
		"offline", "U1", "A1", "rxc_sensor_credentials", map[string]string{"site": "ams"}, tokenHash("csr"), now).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, `"Index Scan"`) {
		t.Fatalf("no index scan in the plan, is it the statement's? %s", plan)
	}
	if strings.Contains(plan, `"Seq Scan"`) {
		t.Errorf("the enrolment statement reads a table sequentially:\n%s", plan)
	}
}

// credentialListener is a connection of its own LISTENing on the channel
// enrolments and revocations are announced on, as every replica does.
type credentialListener struct {
	conn *pgx.Conn
}

// twoReplicas is a fixture with tenant acme provisioned, another
// replica's store on its database (its own pool) and a listener on the
// credentials channel.
func twoReplicas(t *testing.T) (*fixture, *controlplanestore.Store, *credentialListener) {
	t.Helper()
	f := newFixture(t)
	other := replicaStore(t, f.pool)
	f.provisionedTenant(t, "acme")
	return f, other, listenCredentials(t, f)
}

func listenCredentials(t *testing.T, f *fixture) *credentialListener {
	t.Helper()
	conn, err := pgx.ConnectConfig(f.ctx, f.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(f.ctx, `LISTEN rxc_sensor_credentials`); err != nil {
		t.Fatal(err)
	}
	return &credentialListener{conn: conn}
}

// drain returns every announcement that arrives until none has for quiet.
func (l *credentialListener) drain(t *testing.T, quiet time.Duration) []string {
	t.Helper()
	var got []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		n, err := l.conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				t.Fatal(err)
			}
			return got
		}
		got = append(got, n.Payload)
	}
}

// tables dumps every row enrolment may touch, in a stable order.
func (f *fixture) tables(t *testing.T) string {
	t.Helper()
	return pgstoretest.Value[string](f.ctx, t, f.pool, `SELECT concat_ws(E'\n--\n',
		(SELECT string_agg(r::text, E'\n' ORDER BY r::text) FROM sensors r),
		(SELECT string_agg(r::text, E'\n' ORDER BY r::text) FROM sensor_tokens r),
		(SELECT string_agg(r::text, E'\n' ORDER BY r::text) FROM sensor_certificates r),
		(SELECT string_agg(r::text, E'\n' ORDER BY r::text) FROM tenants r))`)
}

// Attack: every way the enrolment statement can be refused (a guessed
// token, an expired one, another tenant's sensor's token, a used token
// replayed, a revoked sensor's own token, an unknown sensor, and the
// conflicts found only after the token would be consumed: a certificate
// serial or sensor token another sensor holds). Each refusal leaves every
// row of sensors, tokens, certificates and tenants byte for byte as it was
// and announces nothing on the credentials channel (a replica would end
// streams on it). Positive control: the sensor then enrols with its own
// token, which changes the rows and is announced exactly once.
func TestAttackEnrolmentRefusalsWriteAndAnnounceNothing(t *testing.T) {
	t.Parallel()
	f := acmeFixture(t)
	f.provisionedTenant(t, "globex")
	l := listenCredentials(t, f)
	victim := f.redeemed(t, "acme")
	foreign := f.redeemed(t, "globex")
	revoked := f.redeemed(t, "acme")
	if err := f.svc.RevokeSensor(f.ctx, revoked.SensorID, "ops@example.com"); err != nil {
		t.Fatal(err)
	}
	holderRed, holder := f.fleet.Enrolled(t, "globex")
	if got := l.drain(t, 300*time.Millisecond); len(got) != 2 {
		t.Fatalf("setup announced %v, want the revocation and the holder's enrolment", got)
	}
	now := f.clock.Now()
	rec := fleet.EnrollmentRecord{
		SensorID: victim.SensorID, EnrollmentTokenHash: tokenHash(victim.EnrollmentToken), Certificate: fleet.IssuedCertificate{Serial: "c0ffee01", NotAfter: now.Add(time.Hour)},
		SensorTokenHash: tokenHash("victim's new sensor token"), SensorTokenExpiresAt: now.Add(time.Hour),
		NATSUserPubKey: "UVICTIM", NATSAccountPubKey: "AACME", State: fleet.StateOffline, At: now,
	}
	before := f.tables(t)
	for _, c := range []struct {
		name string
		edit func(*fleet.EnrollmentRecord)
		want error
	}{
		{"guessed token", func(r *fleet.EnrollmentRecord) { r.EnrollmentTokenHash = tokenHash("guess") }, fleet.ErrInvalidToken},
		{"expired token", func(r *fleet.EnrollmentRecord) { r.At = now.Add(fleet.DefaultEnrollmentTokenTTL + time.Second) }, fleet.ErrInvalidToken},
		{"another tenant's sensor's token", func(r *fleet.EnrollmentRecord) { r.EnrollmentTokenHash = tokenHash(foreign.EnrollmentToken) }, fleet.ErrInvalidToken},
		{"the victim's token for another tenant's sensor", func(r *fleet.EnrollmentRecord) { r.SensorID = foreign.SensorID }, fleet.ErrInvalidToken},
		{"a used token replayed", func(r *fleet.EnrollmentRecord) {
			r.SensorID, r.EnrollmentTokenHash = holderRed.SensorID, tokenHash(holderRed.EnrollmentToken)
		}, fleet.ErrInvalidToken},
		{"a revoked sensor's own token", func(r *fleet.EnrollmentRecord) {
			r.SensorID, r.EnrollmentTokenHash = revoked.SensorID, tokenHash(revoked.EnrollmentToken)
		}, fleet.ErrRevoked},
		{"an unknown sensor", func(r *fleet.EnrollmentRecord) { r.SensorID = "ghost" }, fleet.ErrNotFound},
		{"a certificate serial another sensor holds", func(r *fleet.EnrollmentRecord) { r.Certificate.Serial = holder.Certificate.Serial }, fleet.ErrConflict},
		{"a sensor token another sensor holds", func(r *fleet.EnrollmentRecord) { r.SensorTokenHash = tokenHash(holder.SensorToken) }, fleet.ErrConflict},
	} {
		r := rec
		c.edit(&r)
		if err := f.store.CompleteEnrollment(f.ctx, r); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if after := f.tables(t); after != before {
			t.Errorf("%s: BROKEN: the refusal changed rows:\nbefore:\n%s\nafter:\n%s", c.name, before, after)
			before = after
		}
	}
	if got := l.drain(t, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("BROKEN: refused enrolments announced %v", got)
	}

	if err := f.store.CompleteEnrollment(f.ctx, rec); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	if f.tables(t) == before {
		t.Error("positive control: the enrolment changed no row")
	}
	if got := l.drain(t, 300*time.Millisecond); len(got) != 1 || got[0] != "acme/"+victim.SensorID {
		t.Errorf("positive control announced %v, want acme/%s once", got, victim.SensorID)
	}
}

// Attack: one enrolment token sent many times at once through two
// replicas' stores (each its own connection pool), each attempt with its
// own certificate and sensor token. Exactly one stores anything: one
// certificate, one sensor token, the winner's; one announcement; every
// other attempt is told invalid_token.
func TestAttackEnrolmentStatementRaceAcrossTwoPools(t *testing.T) {
	t.Parallel()
	f, other, l := twoReplicas(t)
	for round := range 5 {
		red := f.redeemed(t, "acme")
		const n = 12
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			store := f.store
			if i%2 == 1 {
				store = other
			}
			wg.Go(func() {
				now := f.clock.Now()
				errs[i] = store.CompleteEnrollment(f.ctx, fleet.EnrollmentRecord{
					SensorID: red.SensorID, EnrollmentTokenHash: tokenHash(red.EnrollmentToken),
					Certificate:     fleet.IssuedCertificate{Serial: fmt.Sprintf("%x%02x", round+1, i), NotAfter: now.Add(time.Hour)},
					SensorTokenHash: tokenHash(fmt.Sprintf("round %d attempt %d", round, i)), SensorTokenExpiresAt: now.Add(time.Hour),
					NATSUserPubKey: fmt.Sprintf("U%d", i), State: fleet.StateOffline, At: now,
				})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: BROKEN: attempts %d and %d both enrolled with one token", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, fleet.ErrInvalidToken):
				t.Errorf("round %d: attempt %d: %v, want invalid token", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no attempt enrolled: %v", round, errs)
		}
		s := f.sensor(t, red.SensorID)
		if want := fmt.Sprintf("%x%02x", round+1, winner); s.Certificate.Serial != want || s.NATSUserPubKey != fmt.Sprintf("U%d", winner) {
			t.Errorf("round %d: sensor holds certificate %s and user %s, want the winner's %s, U%d", round, s.Certificate.Serial, s.NATSUserPubKey, want, winner)
		}
		if n := f.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 1 {
			t.Errorf("round %d: BROKEN: %d certificates stored", round, n)
		}
		if n := f.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND kind = 'sensor'`, red.SensorID); n != 1 {
			t.Errorf("round %d: BROKEN: %d sensor tokens stored", round, n)
		}
		if got := l.drain(t, 300*time.Millisecond); len(got) != 1 {
			t.Errorf("round %d: BROKEN: %d announcements %v, want one", round, len(got), got)
		}
	}
}

// Attack: enrolment racing the sensor's revocation, each through its own
// replica's store (two pools), at the statement level. Whichever commits
// first, the sensor ends revoked with no active certificate and no live
// token, and the channel carries exactly what committed: the revocation,
// plus the enrolment only when it won (an enrolment refused as revoked
// announces nothing and stores nothing).
func TestAttackEnrolmentStatementRacingRevocationAcrossTwoPools(t *testing.T) {
	t.Parallel()
	f, other, l := twoReplicas(t)
	won := map[bool]int{}
	for round := range 16 {
		red := f.redeemed(t, "acme")
		now := f.clock.Now()
		var (
			wg                  sync.WaitGroup
			enrolErr, revokeErr error
		)
		wg.Go(func() {
			enrolErr = f.store.CompleteEnrollment(f.ctx, fleet.EnrollmentRecord{
				SensorID: red.SensorID, EnrollmentTokenHash: tokenHash(red.EnrollmentToken),
				Certificate:     fleet.IssuedCertificate{Serial: fmt.Sprintf("5eed%02x", round), NotAfter: now.Add(time.Hour)},
				SensorTokenHash: tokenHash(fmt.Sprintf("race %d", round)), SensorTokenExpiresAt: now.Add(time.Hour),
				NATSUserPubKey: "U", State: fleet.StateOffline, At: now,
			})
		})
		wg.Go(func() { _, revokeErr = other.RevokeSensor(f.ctx, red.SensorID, "ops@example.com", now) })
		wg.Wait()
		if revokeErr != nil {
			t.Fatalf("round %d: revoke: %v", round, revokeErr)
		}
		want := []string{"acme/" + red.SensorID}
		switch {
		case enrolErr == nil:
			want = append(want, want[0])
		case errors.Is(enrolErr, fleet.ErrRevoked):
			if n := f.count(t, `SELECT count(*) FROM sensor_certificates WHERE sensor_id = $1`, red.SensorID); n != 0 {
				t.Errorf("round %d: BROKEN: an enrolment refused as revoked stored %d certificates", round, n)
			}
			if n := f.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND used_at IS NOT NULL`, red.SensorID); n != 0 {
				t.Errorf("round %d: BROKEN: an enrolment refused as revoked consumed its token", round)
			}
		default:
			t.Fatalf("round %d: enrol: %v, want success or revoked", round, enrolErr)
		}
		won[enrolErr == nil]++
		if s := f.sensor(t, red.SensorID); s.State != fleet.StateRevoked || s.Certificate.Serial != "" {
			t.Errorf("round %d: BROKEN: after the race the sensor is %s with certificate %q", round, s.State, s.Certificate.Serial)
		}
		if n := f.count(t, `SELECT count(*) FROM sensor_tokens WHERE sensor_id = $1 AND used_at IS NULL AND revoked_at IS NULL`, red.SensorID); n != 0 {
			t.Errorf("round %d: BROKEN: a revoked sensor keeps %d live tokens", round, n)
		}
		if got := l.drain(t, 300*time.Millisecond); !slices.Equal(got, want) {
			t.Errorf("round %d: announced %v, want %v", round, got, want)
		}
	}
	t.Logf("enrolment first %d times, revocation first %d times", won[true], won[false])
}
