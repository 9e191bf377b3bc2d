// Package fleettest is the contract suite for the fleet store ports and the
// Locker, and the fakes of the fleet's other ports. Every store
// implementation (PostgreSQL, in-memory) runs the same Run, so they stay
// interchangeable: create-or-return under concurrency, single-use claim
// codes and enrolment tokens, one active certificate per sensor, atomic
// status updates, revocation, commands and mutual exclusion. The use-case
// tests of core/fleet run on the in-memory store and on these fakes.
package fleettest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rxc-project/rxc/core/contracttest"
	"github.com/rxc-project/rxc/core/fleet"
)

// Store is what the suite exercises.
type Store interface {
	fleet.Store
	fleet.Locker
	fleet.HistoryStore
	// CertificateCount is how many certificate rows a sensor holds,
	// active and superseded.
	CertificateCount(ctx context.Context, sensorID string) int
}

// Run runs the suite; newStore returns a fresh, empty store per subtest.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	contracttest.Run(t, newStore, contracttest.Cases[Store]{
		{"CreateTenantCreateOrReturn", testCreateTenant},
		{"CreateTenantConcurrent", testCreateTenantConcurrent},
		{"TenantProvisioning", testTenantProvisioning},
		{"ClaimCodes", testClaimCodes},
		{"RedeemUsableCodeOnly", testRedeem},
		{"RedeemConcurrent", testRedeemConcurrent},
		{"Enrollment", testEnrollment},
		{"EnrollmentConcurrent", testEnrollmentConcurrent},
		{"EnrollmentRefusalWritesNothing", testEnrollmentRefusalWritesNothing},
		{"SensorCredential", testSensorCredential},
		{"ReplaceCertificate", testReplaceCertificate},
		{"EnrolmentResume", testEnrolmentResume},
		{"UpdateSensorStatus", testUpdateSensorStatus},
		{"CheckIn", testCheckIn},
		{"CheckInConcurrent", testCheckInConcurrent},
		{"MarkSilent", testMarkSilent},
		{"RevokeSensor", testRevokeSensor},
		{"Commands", testCommands},
		{"CommandOutcomes", testCommandOutcomes},
		{"SensorFilter", testSensorFilter},
		{"ListSensors", testListSensors},
		{"CountSensors", testCountSensors},
		{"Batches", testBatches},
		{"BatchConcurrent", testBatchConcurrent},
		{"ListBatches", testListBatches},
		{"Labels", testLabels},
		{"Decommission", testDecommission},
		{"DeleteTenant", testDeleteTenant},
		{"HistoryRetention", testHistoryRetention},
		{"Locker", testLocker},
	})
}

var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

func tenant(t *testing.T, s Store, id string) fleet.Tenant {
	t.Helper()
	tn, _, err := s.CreateTenant(context.Background(), fleet.Tenant{ID: id, Name: id, NATSStatus: fleet.NATSPending, CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

func code(t *testing.T, s Store, tenantID, id string, name string) {
	t.Helper()
	c := fleet.ClaimCode{ID: id, TenantID: tenantID, SensorName: name, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), CreatedBy: "ops"}
	if err := s.CreateClaimCode(context.Background(), c, hash("code "+id)); err != nil {
		t.Fatal(err)
	}
}

// pending redeems a fresh code into sensor sensorID of tenantID.
func pending(t *testing.T, s Store, tenantID, sensorID string) fleet.Sensor {
	t.Helper()
	code(t, s, tenantID, "cc-"+sensorID, "")
	sn, err := s.Redeem(context.Background(), fleet.RedeemRecord{
		CodeHash: hash("code cc-" + sensorID), SensorID: sensorID, Hostname: "host-" + sensorID,
		TokenHash: hash("enrol " + sensorID), TokenExpiresAt: t0.Add(15 * time.Minute), At: t0,
	})
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

func certificate(serial string) fleet.IssuedCertificate {
	return fleet.IssuedCertificate{Serial: serial, NotBefore: t0.Add(-time.Minute), NotAfter: t0.Add(168 * time.Hour)}
}

// enrolled gives a sensor with certificate serial and sensor token "sensor <id>".
func enrolled(t *testing.T, s Store, tenantID, sensorID, serial string) fleet.Sensor {
	t.Helper()
	pending(t, s, tenantID, sensorID)
	err := s.CompleteEnrollment(context.Background(), fleet.EnrollmentRecord{
		SensorID: sensorID, EnrollmentTokenHash: hash("enrol " + sensorID), Certificate: certificate(serial),
		SensorTokenHash: hash("sensor " + sensorID), NATSUserPubKey: "U" + sensorID, NATSAccountPubKey: "A" + tenantID,
		State: fleet.StateOffline, At: t0.Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := s.Sensor(context.Background(), sensorID)
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

// sensorIn names a sensor to enrol: its tenant, id and certificate serial.
type sensorIn struct{ tenant, id, serial string }

// seed is the set-up most cases start from: it creates the tenants in
// order (tenant), then enrols the sensors in order (enrolled), and returns
// the context the case goes on with.
func seed(t *testing.T, s Store, tenants []string, sensors ...sensorIn) context.Context {
	t.Helper()
	for _, id := range tenants {
		tenant(t, s, id)
	}
	for _, sn := range sensors {
		enrolled(t, s, sn.tenant, sn.id, sn.serial)
	}
	return context.Background()
}

// idsOf lists the ids of xs in their order (contracttest.Keys), [] for
// none: the fleet suite's wants spell an empty list as []string{}.
func idsOf[T any](xs []T, id func(T) string) []string {
	return append([]string{}, contracttest.Keys(xs, id)...)
}

// sortedIDs is idsOf in sorted order.
func sortedIDs[T any](xs []T, id func(T) string) []string {
	return append([]string{}, contracttest.SortedKeys(xs, id)...)
}

// What idsOf reads of each record.
func sensorID(sn fleet.Sensor) string       { return sn.ID }
func targetID(sn fleet.SensorTarget) string { return sn.ID }
func commandID(c fleet.Command) string      { return c.ID }
func batchID(b fleet.Batch) string          { return b.ID }
func claimCodeID(c fleet.ClaimCode) string  { return c.ID }

func is(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}

func testCreateTenant(t *testing.T, s Store) {
	ctx := context.Background()
	want := fleet.Tenant{ID: "acme", Name: "Acme", NATSStatus: fleet.NATSPending, CreatedAt: t0}
	got, created, err := s.CreateTenant(ctx, want)
	if err != nil || !created {
		t.Fatalf("CreateTenant = %v, %v", created, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	got, created, err = s.CreateTenant(ctx, fleet.Tenant{ID: "acme", Name: "Other", NATSStatus: fleet.NATSPending, CreatedAt: t0.Add(time.Hour)})
	if err != nil || created {
		t.Fatalf("second CreateTenant = %v, %v; want existing", created, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("second create returned (-want +got):\n%s", diff)
	}
	if got, err := s.Tenant(ctx, "acme"); err != nil || got != want {
		t.Errorf("Tenant = %+v, %v", got, err)
	}
	_, err = s.Tenant(ctx, "ghost")
	is(t, "Tenant(ghost)", err, fleet.ErrNotFound)
}

func testCreateTenantConcurrent(t *testing.T, s Store) {
	const n = 20
	var (
		wg      sync.WaitGroup
		created sync.Map
		fails   = make(chan error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := s.CreateTenant(context.Background(), fleet.Tenant{ID: "race", Name: "race", NATSStatus: fleet.NATSPending, CreatedAt: t0})
			if err != nil {
				fails <- err
			}
			if c {
				created.Store(i, true)
			}
		}()
	}
	wg.Wait()
	close(fails)
	for err := range fails {
		t.Errorf("CreateTenant: %v", err)
	}
	count := 0
	created.Range(func(any, any) bool { count++; return true })
	if count != 1 {
		t.Errorf("created %d times, want 1", count)
	}
	list, _ := s.ListTenants(context.Background())
	if len(list) != 1 {
		t.Errorf("%d tenants listed, want 1", len(list))
	}
}

func testTenantProvisioning(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"a", "b"})
	if err := s.SetTenantAccount(ctx, "a", "AKEY"); err != nil {
		t.Fatal(err)
	}
	is(t, "SetTenantAccount(ghost)", s.SetTenantAccount(ctx, "ghost", "X"), fleet.ErrNotFound)
	pend, err := s.PendingTenants(ctx)
	if err != nil || len(pend) != 1 || pend[0].ID != "b" {
		t.Errorf("PendingTenants = %+v, %v; want only b", pend, err)
	}
	a, _ := s.Tenant(ctx, "a")
	if a.NATSStatus != fleet.NATSProvisioned || a.NATSAccountPubKey != "AKEY" {
		t.Errorf("tenant a = %+v", a)
	}
}

func testClaimCodes(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	older := fleet.ClaimCode{ID: "c1", TenantID: "acme", SensorName: "n", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour), CreatedBy: "ops"}
	newer := older
	newer.ID, newer.CreatedAt = "c2", t0.Add(time.Second)
	if err := s.CreateClaimCode(ctx, older, hash("one")); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateClaimCode(ctx, newer, hash("two")); err != nil {
		t.Fatal(err)
	}
	dup := newer
	dup.ID = "c3"
	is(t, "duplicate hash", s.CreateClaimCode(ctx, dup, hash("one")), fleet.ErrConflict)
	list, err := s.ClaimCodes(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]fleet.ClaimCode{newer, older}, list); diff != "" {
		t.Errorf("ClaimCodes, newest first (-want +got):\n%s", diff)
	}
	is(t, "revoke", s.RevokeClaimCode(ctx, "c1", t0.Add(time.Minute)), nil)
	is(t, "revoke again", s.RevokeClaimCode(ctx, "c1", t0.Add(2*time.Minute)), nil)
	is(t, "revoke unknown", s.RevokeClaimCode(ctx, "nope", t0), fleet.ErrNotFound)
	list, _ = s.ClaimCodes(ctx, "acme")
	if !list[1].RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("revoked at %s, want the first revocation's time", list[1].RevokedAt)
	}
	if _, err := s.Redeem(ctx, fleet.RedeemRecord{CodeHash: hash("two"), SensorID: "s1", TokenHash: hash("t"), TokenExpiresAt: t0.Add(time.Hour), At: t0}); err != nil {
		t.Fatal(err)
	}
	is(t, "revoke used", s.RevokeClaimCode(ctx, "c2", t0), fleet.ErrConflict)
	list, _ = s.ClaimCodes(ctx, "acme")
	if !list[0].RevokedAt.IsZero() || list[0].SensorID != "s1" || !list[0].UsedAt.Equal(t0) {
		t.Errorf("used code after refused revoke: %+v", list[0])
	}
}

func testRedeem(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	code(t, s, "acme", "named", "edge-1")
	code(t, s, "acme", "unnamed", "")
	code(t, s, "acme", "bare", "")
	code(t, s, "acme", "revoked", "")
	code(t, s, "acme", "expired", "")
	if err := s.RevokeClaimCode(ctx, "revoked", t0); err != nil {
		t.Fatal(err)
	}
	rec := func(codeID, sensorID, host string, at time.Time) fleet.RedeemRecord {
		return fleet.RedeemRecord{CodeHash: hash("code " + codeID), SensorID: sensorID, Hostname: host, TokenHash: hash("tok " + sensorID), TokenExpiresAt: at.Add(15 * time.Minute), At: at}
	}
	tests := []struct {
		name     string
		r        fleet.RedeemRecord
		wantName string
		wantErr  error
	}{
		{"named by the code", rec("named", "s1", "h1", t0), "edge-1", nil},
		{"named by the host", rec("unnamed", "s2", "h2", t0), "h2", nil},
		{"named by the id", rec("bare", "s3", "", t0), "s3", nil},
		{"used", rec("named", "s4", "h", t0), "", fleet.ErrInvalidClaimCode},
		{"revoked", rec("revoked", "s5", "h", t0), "", fleet.ErrInvalidClaimCode},
		{"expired", rec("expired", "s6", "h", t0.Add(time.Hour)), "", fleet.ErrInvalidClaimCode},
		{"unknown", rec("ghost", "s7", "h", t0), "", fleet.ErrInvalidClaimCode},
	}
	for _, tt := range tests {
		got, err := s.Redeem(ctx, tt.r)
		is(t, tt.name, err, tt.wantErr)
		if tt.wantErr != nil {
			if _, err := s.Sensor(ctx, tt.r.SensorID); !errors.Is(err, fleet.ErrNotFound) {
				t.Errorf("%s: sensor %s exists after a refused redemption", tt.name, tt.r.SensorID)
			}
			continue
		}
		want := fleet.Sensor{ID: tt.r.SensorID, TenantID: "acme", Name: tt.wantName, Hostname: tt.r.Hostname, State: fleet.StatePending, CreatedAt: t0}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: sensor (-want +got):\n%s", tt.name, diff)
		}
		tok, err := s.LiveToken(ctx, tt.r.SensorID, fleet.TokenEnrollment)
		if err != nil || string(tok.Hash) != string(tt.r.TokenHash) || !tok.ExpiresAt.Equal(tt.r.TokenExpiresAt) {
			t.Errorf("%s: enrolment token %+v, %v", tt.name, tok, err)
		}
	}
}

func testRedeemConcurrent(t *testing.T, s Store) {
	tenant(t, s, "acme")
	code(t, s, "acme", "c", "")
	oneWins(t, "Redeem", 50, fleet.ErrInvalidClaimCode, func(i int) error {
		id := fmt.Sprintf("s%d", i)
		_, err := s.Redeem(context.Background(), fleet.RedeemRecord{CodeHash: hash("code c"), SensorID: id, TokenHash: hash(id), TokenExpiresAt: t0.Add(time.Hour), At: t0})
		return err
	})
	if all, _ := s.Sensors(context.Background(), fleet.SensorFilter{}); len(all) != 1 {
		t.Errorf("%d sensors, want 1", len(all))
	}
}

func testEnrollment(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	pending(t, s, "acme", "s1")
	rec := fleet.EnrollmentRecord{
		SensorID: "s1", EnrollmentTokenHash: hash("enrol s1"), Certificate: certificate("aa01"),
		SensorTokenHash: hash("sensor s1"), SensorTokenExpiresAt: t0.Add(168 * time.Hour), NATSUserPubKey: "U1", NATSAccountPubKey: "A1", State: fleet.StateOffline, At: t0.Add(time.Minute),
	}
	wrong := rec
	wrong.EnrollmentTokenHash = hash("guess")
	is(t, "wrong token", s.CompleteEnrollment(ctx, wrong), fleet.ErrInvalidToken)
	late := rec
	late.At = t0.Add(15 * time.Minute)
	is(t, "expired token", s.CompleteEnrollment(ctx, late), fleet.ErrInvalidToken)
	is(t, "enrol", s.CompleteEnrollment(ctx, rec), nil)
	again := rec
	again.Certificate, again.SensorTokenHash = certificate("aa02"), hash("sensor s1 again")
	is(t, "token reuse", s.CompleteEnrollment(ctx, again), fleet.ErrInvalidToken)

	got, err := s.Sensor(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := fleet.Sensor{
		ID: "s1", TenantID: "acme", Name: "host-s1", Hostname: "host-s1", State: fleet.StateOffline,
		Certificate: fleet.Certificate{Serial: "aa01", NotAfter: rec.Certificate.NotAfter, IssuedAt: rec.At}, NATSUserPubKey: "U1", NATSAccountPubKey: "A1", CreatedAt: t0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("enrolled sensor (-want +got):\n%s", diff)
	}
	_, err = s.LiveToken(ctx, "s1", fleet.TokenEnrollment)
	is(t, "enrolment token after use", err, fleet.ErrNotFound)
	tok, err := s.LiveToken(ctx, "s1", fleet.TokenSensor)
	if err != nil || string(tok.Hash) != string(hash("sensor s1")) || !tok.ExpiresAt.Equal(t0.Add(168*time.Hour)) {
		t.Errorf("sensor token %+v, %v", tok, err)
	}

	pending(t, s, "acme", "s2")
	if _, err := s.RevokeSensor(ctx, "s2", "ops", t0); err != nil {
		t.Fatal(err)
	}
	revoked := rec
	revoked.SensorID, revoked.EnrollmentTokenHash, revoked.Certificate, revoked.SensorTokenHash = "s2", hash("enrol s2"), certificate("bb01"), hash("sensor s2")
	is(t, "revoked sensor", s.CompleteEnrollment(ctx, revoked), fleet.ErrRevoked)
	if n := s.CertificateCount(ctx, "s2"); n != 0 {
		t.Errorf("a refused enrolment of a revoked sensor stored %d certificates", n)
	}
	unknown := rec
	unknown.SensorID = "ghost"
	is(t, "unknown sensor", s.CompleteEnrollment(ctx, unknown), fleet.ErrNotFound)

	// Another sensor's enrolment token (here of another tenant) enrols
	// nothing and stays usable by its own sensor.
	tenant(t, s, "globex")
	pending(t, s, "acme", "s3")
	pending(t, s, "globex", "g1")
	foreign := rec
	foreign.SensorID, foreign.EnrollmentTokenHash, foreign.Certificate, foreign.SensorTokenHash = "g1", hash("enrol s3"), certificate("dd01"), hash("sensor g1")
	is(t, "another tenant's sensor's token", s.CompleteEnrollment(ctx, foreign), fleet.ErrInvalidToken)
	if n := s.CertificateCount(ctx, "g1"); n != 0 {
		t.Errorf("an enrolment with another sensor's token stored %d certificates", n)
	}
	if g1, _ := s.Sensor(ctx, "g1"); g1.State != fleet.StatePending || g1.NATSUserPubKey != "" {
		t.Errorf("an enrolment with another sensor's token changed the sensor: %+v", g1)
	}
	if _, err := s.LiveToken(ctx, "s3", fleet.TokenEnrollment); err != nil {
		t.Errorf("s3's enrolment token after its use for g1: %v, want it still live", err)
	}
	own := foreign
	own.SensorID, own.Certificate = "s3", certificate("dd02")
	is(t, "s3 with its own token", s.CompleteEnrollment(ctx, own), nil)
}

// testEnrollmentRefusalWritesNothing: an enrolment that cannot be stored
// whole stores none of it. A certificate serial or sensor token another
// record already holds is found only after the enrolment token would be
// consumed; the refusal must leave that token usable, the sensor pending
// without a NATS identity, and the holder of the serial or token as it
// was. A sensor token (its own or another's) is no enrolment token.
// Positive control: the same record with fresh material enrols.
func testEnrollmentRefusalWritesNothing(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme", "globex"})
	holder := enrolled(t, s, "globex", "g1", "aa01")
	before := pending(t, s, "acme", "s1")
	rec := fleet.EnrollmentRecord{
		SensorID: "s1", EnrollmentTokenHash: hash("enrol s1"), Certificate: certificate("bb01"),
		SensorTokenHash: hash("sensor s1"), SensorTokenExpiresAt: t0.Add(168 * time.Hour), NATSUserPubKey: "U1", NATSAccountPubKey: "A1",
		State: fleet.StateOffline, At: t0.Add(time.Minute),
	}
	for _, c := range []struct {
		name string
		edit func(*fleet.EnrollmentRecord)
		want error
	}{
		{"certificate serial another tenant's sensor holds", func(r *fleet.EnrollmentRecord) { r.Certificate = certificate("aa01") }, fleet.ErrConflict},
		{"sensor token hash another sensor holds", func(r *fleet.EnrollmentRecord) { r.SensorTokenHash = hash("sensor g1") }, fleet.ErrConflict},
		{"its enrolment token again as its sensor token", func(r *fleet.EnrollmentRecord) { r.SensorTokenHash = hash("enrol s1") }, fleet.ErrConflict},
		{"another sensor's sensor token as the enrolment token", func(r *fleet.EnrollmentRecord) { r.EnrollmentTokenHash = hash("sensor g1") }, fleet.ErrInvalidToken},
		{"an enrolled sensor's own sensor token to enrol it again", func(r *fleet.EnrollmentRecord) {
			r.SensorID, r.EnrollmentTokenHash, r.SensorTokenHash = "g1", hash("sensor g1"), hash("sensor g1 again")
		}, fleet.ErrInvalidToken},
	} {
		r := rec
		c.edit(&r)
		is(t, c.name, s.CompleteEnrollment(ctx, r), c.want)
		if got, err := s.Sensor(ctx, "s1"); err != nil || !cmp.Equal(before, got) {
			t.Errorf("%s: BROKEN: the refusal changed the sensor (-before +after):\n%s", c.name, cmp.Diff(before, got))
		}
		if tok, err := s.LiveToken(ctx, "s1", fleet.TokenEnrollment); err != nil || string(tok.Hash) != string(hash("enrol s1")) {
			t.Errorf("%s: BROKEN: the refusal consumed the enrolment token: %x, %v", c.name, tok.Hash, err)
		}
		if _, err := s.LiveToken(ctx, "s1", fleet.TokenSensor); !errors.Is(err, fleet.ErrNotFound) {
			t.Errorf("%s: BROKEN: the refusal stored a sensor token: %v", c.name, err)
		}
		if n := s.CertificateCount(ctx, "s1"); n != 0 {
			t.Errorf("%s: BROKEN: the refusal stored %d certificates", c.name, n)
		}
		if got, err := s.Sensor(ctx, "g1"); err != nil || !cmp.Equal(holder, got) {
			t.Errorf("%s: BROKEN: the refusal changed the holder (-before +after):\n%s", c.name, cmp.Diff(holder, got))
		}
		if tok, err := s.LiveToken(ctx, "g1", fleet.TokenSensor); err != nil || string(tok.Hash) != string(hash("sensor g1")) {
			t.Errorf("%s: BROKEN: the holder's sensor token is no longer live: %x, %v", c.name, tok.Hash, err)
		}
		if n := s.CertificateCount(ctx, "g1"); n != 1 {
			t.Errorf("%s: the holder has %d certificates, want 1", c.name, n)
		}
	}
	is(t, "positive control: the same enrolment with its own material", s.CompleteEnrollment(ctx, rec), nil)
	if got, _ := s.Sensor(ctx, "s1"); got.Certificate.Serial != "bb01" || got.State != fleet.StateOffline || got.NATSUserPubKey != "U1" {
		t.Errorf("positive control: enrolled sensor %+v", got)
	}
}

// testEnrollmentConcurrent: one enrolment token used by many requests at
// once stores exactly one enrolment (one certificate, one sensor token);
// the use case relies on it to consume the token only when it stores.
// oneWins runs call n times at once and requires exactly one to succeed and
// every other to fail with loser: a store's answer to a race for one
// record.
func oneWins(t *testing.T, what string, n int, loser error, call func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	results := make(chan error, n)
	for i := range n {
		wg.Go(func() { results <- call(i) })
	}
	wg.Wait()
	close(results)
	wins := 0
	for err := range results {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, loser):
			t.Errorf("%s: %v, want success or %v", what, err, loser)
		}
	}
	if wins != 1 {
		t.Errorf("%s succeeded %d times at once, want 1", what, wins)
	}
}

func testEnrollmentConcurrent(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	pending(t, s, "acme", "s1")
	oneWins(t, "CompleteEnrollment", 20, fleet.ErrInvalidToken, func(i int) error {
		return s.CompleteEnrollment(ctx, fleet.EnrollmentRecord{
			SensorID: "s1", EnrollmentTokenHash: hash("enrol s1"), Certificate: certificate(fmt.Sprintf("cc%02d", i)),
			SensorTokenHash: hash(fmt.Sprintf("sensor s1 %02d", i)), NATSUserPubKey: "U1", NATSAccountPubKey: "A1",
			State: fleet.StateOffline, At: t0.Add(time.Minute),
		})
	})
	if got := s.CertificateCount(ctx, "s1"); got != 1 {
		t.Errorf("%d certificates, want 1", got)
	}
	got, err := s.Sensor(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.LiveToken(ctx, "s1", fleet.TokenSensor)
	if err != nil || len(got.Certificate.Serial) != 4 || string(tok.Hash) != string(hash("sensor s1 "+got.Certificate.Serial[2:])) {
		t.Errorf("live sensor token %x (%v) is not the one stored with the active certificate %s", tok.Hash, err, got.Certificate.Serial)
	}
}

// testSensorCredential: the one read behind token checks gives the sensor
// as Sensor does, only its live token of the kind asked for (none once
// used or replaced, none of another sensor), and its own tenant's NATS
// status.
func testSensorCredential(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme", "globex"})
	if err := s.SetTenantAccount(ctx, "globex", "AGLOBEX"); err != nil {
		t.Fatal(err)
	}
	pending(t, s, "acme", "s1")
	pending(t, s, "globex", "g1")

	c, err := s.SensorCredential(ctx, "s1", fleet.TokenEnrollment)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := s.Sensor(ctx, "s1")
	if diff := cmp.Diff(want, c.Sensor); diff != "" {
		t.Errorf("sensor (-Sensor +SensorCredential):\n%s", diff)
	}
	if string(c.Token.Hash) != string(hash("enrol s1")) || c.Token.SensorID != "s1" || c.Token.Kind != fleet.TokenEnrollment ||
		!c.Token.ExpiresAt.Equal(t0.Add(15*time.Minute)) || c.TenantNATSStatus != fleet.NATSPending {
		t.Errorf("credential of pending s1: %+v", c)
	}
	if c, err := s.SensorCredential(ctx, "s1", fleet.TokenSensor); err != nil || c.Token.Hash != nil || c.Sensor.ID != "s1" {
		t.Errorf("sensor token of a sensor that has none: %+v, %v", c.Token, err)
	}
	if c, err := s.SensorCredential(ctx, "g1", fleet.TokenEnrollment); err != nil || string(c.Token.Hash) != string(hash("enrol g1")) ||
		c.TenantNATSStatus != fleet.NATSProvisioned || c.Sensor.TenantID != "globex" {
		t.Errorf("credential of g1 (provisioned tenant): %+v, %v", c, err)
	}
	_, err = s.SensorCredential(ctx, "ghost", fleet.TokenEnrollment)
	is(t, "unknown sensor", err, fleet.ErrNotFound)

	enrolled(t, s, "acme", "s2", "cc01")
	c, err = s.SensorCredential(ctx, "s2", fleet.TokenEnrollment)
	if err != nil || c.Token.Hash != nil {
		t.Errorf("used enrolment token still live: %+v, %v", c.Token, err)
	}
	c, err = s.SensorCredential(ctx, "s2", fleet.TokenSensor)
	if err != nil || string(c.Token.Hash) != string(hash("sensor s2")) || c.Sensor.Certificate.Serial != "cc01" || c.Sensor.State != fleet.StateOffline {
		t.Errorf("enrolled s2: %+v, %v", c, err)
	}
	if _, err := s.RevokeSensor(ctx, "s2", "ops", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	c, err = s.SensorCredential(ctx, "s2", fleet.TokenSensor)
	if err != nil || c.Sensor.State != fleet.StateRevoked || c.Token.Hash != nil {
		t.Errorf("revoked s2: state %s, token %x, %v; want revoked and no live token", c.Sensor.State, c.Token.Hash, err)
	}
}

func testReplaceCertificate(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"}, sensorIn{"acme", "s1", "aa01"}, sensorIn{"acme", "s2", "bb01"})
	renew := func(replaces, serial string, user fleet.NATSUser, token string, at time.Time) error {
		c := certificate(serial)
		c.NotAfter = at.Add(300 * time.Hour)
		return s.RenewCertificate(ctx, fleet.RenewalRecord{
			SensorID: "s1", ReplacesSerial: replaces, Certificate: c, NATS: user,
			SensorTokenHash: hash(token), SensorTokenExpiresAt: c.NotAfter, At: at,
		})
	}
	if _, err := s.ActiveRenewal(ctx, "s1"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("ActiveRenewal of an enrolment's certificate: %v, want ErrNotFound", err)
	}
	is(t, "renew", renew("aa01", "aa02", fleet.NATSUser{}, "token 2", t0.Add(time.Hour)), nil)
	got, _ := s.Sensor(ctx, "s1")
	if diff := cmp.Diff(fleet.Certificate{Serial: "aa02", NotAfter: t0.Add(301 * time.Hour), IssuedAt: t0.Add(time.Hour)}, got.Certificate); diff != "" {
		t.Errorf("certificate after renewal (-want +got):\n%s", diff)
	}
	if got.NATSUserPubKey != "Us1" || got.NATSAccountPubKey != "Aacme" {
		t.Errorf("NATS user after a renewal naming none = %s/%s, want Aacme/Us1 kept", got.NATSAccountPubKey, got.NATSUserPubKey)
	}
	// The sensor token rotates: the old one is gone, the new one expires
	// with the certificate.
	tok, err := s.LiveToken(ctx, "s1", fleet.TokenSensor)
	if err != nil || string(tok.Hash) != string(hash("token 2")) || !tok.ExpiresAt.Equal(t0.Add(301*time.Hour)) {
		t.Errorf("sensor token after renewal %+v, %v", tok, err)
	}
	// A renewal proven with a certificate that is no longer active lost a
	// race (or replays an old proof): refused, nothing changes.
	is(t, "renew from a superseded certificate", renew("aa01", "aa09", fleet.NATSUser{}, "token x", t0.Add(2*time.Hour)), fleet.ErrInvalidToken)
	if got, _ := s.Sensor(ctx, "s1"); got.Certificate.Serial != "aa02" {
		t.Errorf("a refused renewal changed the certificate to %s", got.Certificate.Serial)
	}
	// A renewal that got a new NATS user (the old one was revoked by an
	// upgrade) records it, so revoking the sensor reaches it.
	is(t, "renew with a new NATS user", renew("aa02", "aa04", fleet.NATSUser{AccountPubKey: "Aacme", UserPubKey: "Us1-new"}, "token 3", t0.Add(2*time.Hour)), nil)
	if got, _ := s.Sensor(ctx, "s1"); got.NATSUserPubKey != "Us1-new" || got.Certificate.Serial != "aa04" {
		t.Errorf("after renewal with a new NATS user: user %s serial %s; want Us1-new and aa04", got.NATSUserPubKey, got.Certificate.Serial)
	}
	is(t, "serial of another sensor", renew("aa04", "bb01", fleet.NATSUser{}, "token 4", t0.Add(3*time.Hour)), fleet.ErrConflict)
	// Superseded certificates are pruned but the latest few.
	serial := "aa04"
	for i := range 10 {
		next := fmt.Sprintf("ab%02d", i)
		is(t, "renew "+next, renew(serial, next, fleet.NATSUser{}, "token r"+next, t0.Add(time.Duration(4+i)*time.Hour)), nil)
		serial = next
	}
	if n := s.CertificateCount(ctx, "s1"); n > 4 {
		t.Errorf("sensor holds %d certificate rows after 13 renewals, want the active one and at most 3 superseded", n)
	}
	proven := fleet.ActiveRenewal{Serial: "ac03", CSRSHA256: hash("csr 3"), ProvenSerial: serial, ProvenTokenHash: hash("token r" + serial),
		ProvenSignedAt: t0.Add(15*time.Hour - time.Second).UTC()}
	c3 := certificate("ac03")
	c3.NotAfter = t0.Add(300 * time.Hour)
	is(t, "renew recording what it proved", s.RenewCertificate(ctx, fleet.RenewalRecord{
		SensorID: "s1", ReplacesSerial: serial, Certificate: c3, CSRSHA256: proven.CSRSHA256,
		ProvenSerial: proven.ProvenSerial, ProvenTokenHash: proven.ProvenTokenHash, ProvenSignedAt: proven.ProvenSignedAt,
		SensorTokenHash: hash("token ac03"), SensorTokenExpiresAt: c3.NotAfter, At: t0.Add(15 * time.Hour),
	}), nil)
	if got, err := s.ActiveRenewal(ctx, "s1"); err != nil || !cmp.Equal(proven, got) {
		t.Errorf("ActiveRenewal = %+v, %v; want %+v", got, err, proven)
	}
	if _, err := s.ActiveRenewal(ctx, "s2"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("ActiveRenewal of another sensor: %v, want ErrNotFound", err)
	}
	serial = "ac03"
	other, _ := s.Sensor(ctx, "s2")
	if other.Certificate.Serial != "bb01" {
		t.Errorf("other sensor's certificate changed to %q", other.Certificate.Serial)
	}
	if _, err := s.RevokeSensor(ctx, "s1", "ops", t0); err != nil {
		t.Fatal(err)
	}
	is(t, "revoked", renew(serial, "aa03", fleet.NATSUser{UserPubKey: "U-late"}, "token late", t0.Add(20*time.Hour)), fleet.ErrRevoked)
	ghost := fleet.RenewalRecord{SensorID: "ghost", ReplacesSerial: "cc00", Certificate: certificate("cc01"), SensorTokenHash: hash("g"), At: t0}
	is(t, "unknown", s.RenewCertificate(ctx, ghost), fleet.ErrNotFound)
}

// testEnrolmentResume: an enrolment with a proof keeps the CSR's digest,
// the proof's signedAt and its token with the certificate (ActiveEnrolment,
// with the token's expiry and revocation); an answer sent again
// (RenewCertificate with EnrolmentTokenHash) keeps them for the new
// certificate; a plain renewal, an old agent's enrolment or another
// sensor has none.
func testEnrolmentResume(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"}, sensorIn{"acme", "old", "dd01"})
	if _, err := s.ActiveEnrolment(ctx, "old"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("ActiveEnrolment of an enrolment without a proof: %v, want ErrNotFound", err)
	}
	pending(t, s, "acme", "s1")
	signedAt := t0.Add(time.Minute - time.Second).UTC()
	is(t, "enrol with a proof", s.CompleteEnrollment(ctx, fleet.EnrollmentRecord{
		SensorID: "s1", EnrollmentTokenHash: hash("enrol s1"), Certificate: certificate("ee01"),
		SensorTokenHash: hash("sensor s1"), NATSUserPubKey: "Us1", NATSAccountPubKey: "Aacme",
		State: fleet.StateOffline, At: t0.Add(time.Minute), CSRSHA256: hash("csr s1"), ProvenSignedAt: signedAt,
	}), nil)
	want := fleet.ActiveEnrolment{Serial: "ee01", TokenHash: hash("enrol s1"), CSRSHA256: hash("csr s1"),
		ProvenSignedAt: signedAt, TokenExpiresAt: t0.Add(15 * time.Minute).UTC()}
	if got, err := s.ActiveEnrolment(ctx, "s1"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("ActiveEnrolment = %+v, %v; want %+v", got, err, want)
	}
	if _, err := s.ActiveRenewal(ctx, "s1"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("ActiveRenewal of an enrolment's certificate: %v, want ErrNotFound", err)
	}
	again := func(replaces, serial string, at time.Time) error {
		c := certificate(serial)
		return s.RenewCertificate(ctx, fleet.RenewalRecord{
			SensorID: "s1", ReplacesSerial: replaces, Certificate: c, CSRSHA256: hash("csr s1"),
			ProvenSignedAt: at.Add(-time.Second), EnrolmentTokenHash: hash("enrol s1"),
			SensorTokenHash: hash("token " + serial), SensorTokenExpiresAt: c.NotAfter, At: at,
		})
	}
	is(t, "answer again", again("ee01", "ee02", t0.Add(2*time.Minute)), nil)
	want.Serial, want.ProvenSignedAt = "ee02", t0.Add(2*time.Minute-time.Second).UTC()
	if got, err := s.ActiveEnrolment(ctx, "s1"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("ActiveEnrolment after the answer sent again = %+v, %v; want %+v", got, err, want)
	}
	// Of two answers for the same undelivered certificate one is stored.
	is(t, "answer again for a replaced certificate", again("ee01", "ee03", t0.Add(3*time.Minute)), fleet.ErrInvalidToken)
	if got, _ := s.Sensor(ctx, "s1"); got.Certificate.Serial != "ee02" {
		t.Errorf("a refused answer changed the certificate to %s", got.Certificate.Serial)
	}
	// A renewal ends it.
	c := certificate("ee04")
	is(t, "renew", s.RenewCertificate(ctx, fleet.RenewalRecord{
		SensorID: "s1", ReplacesSerial: "ee02", Certificate: c, CSRSHA256: hash("csr 4"), ProvenSerial: "ee02",
		ProvenTokenHash: hash("token ee02"), ProvenSignedAt: t0.Add(4 * time.Minute), SensorTokenHash: hash("token ee04"),
		SensorTokenExpiresAt: c.NotAfter, At: t0.Add(4 * time.Minute),
	}), nil)
	if _, err := s.ActiveEnrolment(ctx, "s1"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("ActiveEnrolment after a renewal: %v, want ErrNotFound", err)
	}
	if _, err := s.ActiveEnrolment(ctx, "ghost"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("ActiveEnrolment of an unknown sensor: %v, want ErrNotFound", err)
	}
	// A revoked sensor's token reads as revoked.
	pending(t, s, "acme", "s2")
	is(t, "enrol s2 with a proof", s.CompleteEnrollment(ctx, fleet.EnrollmentRecord{
		SensorID: "s2", EnrollmentTokenHash: hash("enrol s2"), Certificate: certificate("ef01"),
		SensorTokenHash: hash("sensor s2"), State: fleet.StateOffline, At: t0.Add(time.Minute),
		CSRSHA256: hash("csr s2"), ProvenSignedAt: signedAt,
	}), nil)
	if _, err := s.RevokeSensor(ctx, "s2", "ops", t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ActiveEnrolment(ctx, "s2"); err == nil && !got.TokenRevoked && got.Serial == "ef01" {
		t.Errorf("ActiveEnrolment of a revoked sensor = %+v: token not revoked and certificate active", got)
	}
}

// update applies one sensor's status through the batch method.
func update(s Store, tenantID, sensorID string, apply func(fleet.SensorStatus) (fleet.SensorStatus, bool)) (found bool, err error) {
	err = s.UpdateSensorStatuses(context.Background(), []fleet.SensorRef{{TenantID: tenantID, SensorID: sensorID}}, func(_ fleet.SensorRef, cur fleet.SensorStatus, f bool) (fleet.SensorStatus, bool) {
		found = f
		return apply(cur)
	})
	return found, err
}

func testUpdateSensorStatus(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme", "other"}, sensorIn{"acme", "s1", "aa01"}, sensorIn{"acme", "s2", "bb01"})
	mine := fleet.Command{ID: "cmd-1", TenantID: "acme", SensorID: "s1", Action: fleet.ActionStart, IssuedAt: t0, IssuedBy: "ops", ExpiresAt: t0.Add(10 * time.Minute)}
	theirs := mine
	theirs.ID, theirs.SensorID = "cmd-2", "s2"
	for _, c := range []fleet.Command{mine, theirs} {
		if _, _, err := s.CreateCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := update(s, "acme", "s1", func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
		return fleet.SensorStatus{State: fleet.StateError, LastSeenAt: t0}, false
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Sensor(ctx, "s1"); got.State != fleet.StateOffline || !got.LastSeenAt.IsZero() {
		t.Errorf("an update apply declined changed the sensor: %+v", got)
	}
	var seen fleet.SensorStatus
	at := t0.Add(time.Hour)
	found, err := update(s, "acme", "s1", func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
		seen = cur
		return fleet.SensorStatus{State: fleet.StateRunning, LastSeenAt: at, LastStatusAt: at.Add(-time.Second), Results: []fleet.CommandResult{{CommandID: "cmd-2", Outcome: fleet.OutcomeApplied, At: at}}, AcknowledgedAt: at}, true
	})
	if err != nil || !found {
		t.Fatalf("update: found=%v err=%v", found, err)
	}
	if diff := cmp.Diff(fleet.SensorStatus{State: fleet.StateOffline}, seen); diff != "" {
		t.Errorf("status passed to apply (-want +got):\n%s", diff)
	}
	if _, err := update(s, "acme", "s1", func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
		seen = cur
		cur.Results = []fleet.CommandResult{
			{CommandID: "cmd-1", Outcome: fleet.OutcomeRefused, Reason: fleet.ReasonExpired, Detail: "arrived late", At: at},
			{CommandID: "cmd-1", Outcome: fleet.OutcomeApplied, At: at},
		}
		cur.AcknowledgedAt = at
		return cur, true
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fleet.SensorStatus{State: fleet.StateRunning, LastSeenAt: at, LastStatusAt: at.Add(-time.Second)}, seen); diff != "" {
		t.Errorf("stored status (-want +got):\n%s", diff)
	}
	s1, _ := s.Sensor(ctx, "s1")
	s2, _ := s.Sensor(ctx, "s2")
	// The first result of a command wins; a report accepts the command.
	if c := s1.LastCommand; !c.AcknowledgedAt.Equal(at) || c.Outcome != fleet.OutcomeRefused || c.OutcomeReason != fleet.ReasonExpired ||
		c.OutcomeDetail != "arrived late" || c.Status != fleet.CommandAccepted {
		t.Errorf("own command after its result: %+v", c)
	}
	if !s2.LastCommand.AcknowledgedAt.IsZero() {
		t.Errorf("another sensor acknowledged s2's command: %+v", s2.LastCommand)
	}
	keep := func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) { return cur, true }
	if found, _ := update(s, "other", "s1", keep); found {
		t.Error("a sensor was found under another tenant")
	}
	if found, _ := update(s, "acme", "ghost", keep); found {
		t.Error("an unknown sensor was found")
	}

	// A batch: each sensor gets its own status, unknown ones are reported
	// as not found, and apply sees every ref once.
	enrolled(t, s, "acme", "s3", "cc01")
	refs := []fleet.SensorRef{{TenantID: "acme", SensorID: "s3"}, {TenantID: "acme", SensorID: "ghost"}, {TenantID: "acme", SensorID: "s2"}}
	calls := map[string]bool{}
	err = s.UpdateSensorStatuses(ctx, refs, func(ref fleet.SensorRef, cur fleet.SensorStatus, found bool) (fleet.SensorStatus, bool) {
		calls[ref.SensorID] = found
		return fleet.SensorStatus{State: fleet.StateStopped, LastSeenAt: at, LastStatusAt: at}, true
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"s3": true, "ghost": false, "s2": true}, calls); diff != "" {
		t.Errorf("apply calls (-want +got):\n%s", diff)
	}
	for _, id := range []string{"s2", "s3"} {
		if got, _ := s.Sensor(ctx, id); got.State != fleet.StateStopped {
			t.Errorf("%s state %s after the batch, want stopped", id, got.State)
		}
	}
}

// checkIn is one check-in of CheckIn.
func checkIn(tenantID, sensorID, serial, version, addr string) fleet.SensorCheckIn {
	return fleet.SensorCheckIn{Ref: fleet.SensorRef{TenantID: tenantID, SensorID: sensorID}, Serial: serial, AgentVersion: version, Address: addr}
}

func testCheckIn(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme", "other"},
		sensorIn{"acme", "s1", "aa01"}, sensorIn{"acme", "s2", "bb01"}, sensorIn{"acme", "gone", "cc01"},
		sensorIn{"acme", "renewed", "dd01"}, sensorIn{"other", "theirs", "ee01"})
	pending(t, s, "acme", "pend")
	if _, err := s.RevokeSensor(ctx, "gone", "ops", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	renewal := fleet.RenewalRecord{SensorID: "renewed", ReplacesSerial: "dd01", Certificate: certificate("dd02"), SensorTokenHash: hash("renewed 2"), At: t0.Add(time.Minute)}
	if err := s.RenewCertificate(ctx, renewal); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	in := []fleet.SensorCheckIn{
		checkIn("acme", "s1", "aa01", "1.0.0", "192.0.2.1"),     // good
		checkIn("acme", "gone", "cc01", "evil", "192.0.2.9"),    // revoked
		checkIn("other", "s2", "bb01", "evil", "192.0.2.9"),     // another tenant's name
		checkIn("acme", "s2", "aa01", "evil", "192.0.2.9"),      // another sensor's serial
		checkIn("acme", "renewed", "dd01", "evil", "192.0.2.9"), // superseded
		checkIn("acme", "renewed", "dd02", "", "192.0.2.4"),     // its new certificate
		checkIn("acme", "ghost", "aa01", "evil", ""),            // unknown
		checkIn("acme", "pend", "ff01", "evil", ""),             // never enrolled
		checkIn("acme", "theirs", "ee01", "evil", ""),           // the tenant of the certificate is other
	}
	got, err := s.CheckIn(ctx, in, now, now.Add(-5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true, false, false, false, false, true, false, false, false}, got); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	want := map[string]fleet.SensorStatus{
		"s1":      {State: fleet.StateOnline, LastSeenAt: now, AgentVersion: "1.0.0", Address: "192.0.2.1"},
		"s2":      {State: fleet.StateOffline},
		"gone":    {State: fleet.StateRevoked},
		"renewed": {State: fleet.StateOnline, LastSeenAt: now, Address: "192.0.2.4"},
		"pend":    {State: fleet.StatePending},
		"theirs":  {State: fleet.StateOffline},
	}
	for id, w := range want {
		sn, err := s.Sensor(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		g := fleet.SensorStatus{State: sn.State, LastSeenAt: sn.LastSeenAt, AgentVersion: sn.AgentVersion, Address: sn.Address}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s after the check-ins (-want +got):\n%s", id, diff)
		}
	}

	// The superseded certificate alone (not beside the new one).
	if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "renewed", "dd01", "evil", "")}, now.Add(time.Minute), now); err != nil || got[0] {
		t.Errorf("check-in on a superseded certificate: recorded %v, %v; want refused", got, err)
	}
	if sn, _ := s.Sensor(ctx, "renewed"); sn.AgentVersion == "evil" || !sn.LastSeenAt.Equal(now) {
		t.Errorf("a superseded certificate's check-in was written: %+v", sn)
	}
	// The store matches the serial exactly (the use case lower-cases it
	// first): the same digits in another case, or with a leading zero,
	// are not the certificate.
	for _, serial := range []string{"AA01", "0aa01", "aa01 ", "aa0"} {
		if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "s1", serial, "evil", "")}, now.Add(time.Minute), now); err != nil || got[0] {
			t.Errorf("check-in with serial %q for aa01: recorded %v, %v; want refused", serial, got, err)
		}
	}
	if sn, _ := s.Sensor(ctx, "s1"); sn.AgentVersion == "evil" {
		t.Errorf("a check-in with a near-miss serial was written: %+v", sn)
	}
	// Expired: refused though active.
	late := certificate("aa01").NotAfter
	if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "s1", "aa01", "", "")}, late, late.Add(-5*time.Second)); err != nil || got[0] {
		t.Errorf("check-in at the certificate's expiry: recorded %v, %v; want refused", got, err)
	}

	// Seen at or after fresh and nothing to change: authorised, not
	// written; a new address is written; lastSeenAt never goes back.
	soon := now.Add(3 * time.Second)
	if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "s1", "aa01", "1.0.0", "192.0.2.1")}, soon, soon.Add(-5*time.Second)); err != nil || !got[0] {
		t.Fatalf("fresh check-in: recorded %v, %v; want authorised", got, err)
	}
	if sn, _ := s.Sensor(ctx, "s1"); !sn.LastSeenAt.Equal(now) {
		t.Errorf("a fresh check-in changing nothing was written: seen %s, want %s", sn.LastSeenAt, now)
	}
	if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "s1", "aa01", "", "192.0.2.2")}, soon, soon.Add(-5*time.Second)); err != nil || !got[0] {
		t.Fatalf("fresh check-in from a new address: recorded %v, %v", got, err)
	}
	if sn, _ := s.Sensor(ctx, "s1"); !sn.LastSeenAt.Equal(soon) || sn.Address != "192.0.2.2" || sn.AgentVersion != "1.0.0" {
		t.Errorf("check-in from a new address: seen %s from %q version %q; want %s, 192.0.2.2, 1.0.0", sn.LastSeenAt, sn.Address, sn.AgentVersion, soon)
	}
	if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "s1", "aa01", "1.1.0", "")}, now, now.Add(-5*time.Second)); err != nil || !got[0] {
		t.Fatalf("check-in stamped earlier: recorded %v, %v", got, err)
	}
	if sn, _ := s.Sensor(ctx, "s1"); !sn.LastSeenAt.Equal(soon) || sn.AgentVersion != "1.1.0" {
		t.Errorf("check-in stamped earlier: seen %s version %q; want %s kept, 1.1.0", sn.LastSeenAt, sn.AgentVersion, soon)
	}
	// A status report leaves it as it found it; an offline sensor is
	// written even when fresh.
	if _, err := update(s, "acme", "s1", func(cur fleet.SensorStatus) (fleet.SensorStatus, bool) {
		cur.State = fleet.StateOffline
		return cur, true
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "s1", "aa01", "", "")}, soon, soon.Add(-5*time.Second)); err != nil || !got[0] {
		t.Fatalf("offline check-in: recorded %v, %v", got, err)
	}
	if sn, _ := s.Sensor(ctx, "s1"); sn.State != fleet.StateOnline {
		t.Errorf("a fresh check-in of an offline sensor: %s, want online", sn.State)
	}
	// Revoked after a check-in: the next is refused.
	if _, err := s.RevokeSensor(ctx, "s1", "ops", soon); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CheckIn(ctx, []fleet.SensorCheckIn{checkIn("acme", "s1", "aa01", "", "")}, soon, soon.Add(-5*time.Second)); err != nil || got[0] {
		t.Errorf("check-in after the revocation: recorded %v, %v; want refused", got, err)
	}
}

// Check-ins, status batches and a revocation on the same sensors at once
// (several replicas): no deadlock, no error, and after the revocation
// committed no check-in of the sensor is authorised.
func testCheckInConcurrent(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	const n = 20
	var ins []fleet.SensorCheckIn
	var refs []fleet.SensorRef
	for i := range n {
		id, serial := fmt.Sprintf("s%02d", i), fmt.Sprintf("%04x", i+1)
		enrolled(t, s, "acme", id, serial)
		ins = append(ins, checkIn("acme", id, serial, "", ""))
		refs = append(refs, fleet.SensorRef{TenantID: "acme", SensorID: id})
	}
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for w := range 6 {
		wg.Go(func() {
			for r := range 10 {
				at := t0.Add(time.Duration(r*6+w) * time.Minute)
				// Each worker in its own order, checks and reports mixed.
				batch := append([]fleet.SensorCheckIn(nil), ins...)
				if w%2 == 1 {
					slices.Reverse(batch)
				}
				if _, err := s.CheckIn(ctx, batch, at, at.Add(-time.Second)); err != nil {
					errc <- err
					return
				}
				rs := append([]fleet.SensorRef(nil), refs...)
				if w%3 == 0 {
					slices.Reverse(rs)
				}
				if err := s.UpdateSensorStatuses(ctx, rs, func(_ fleet.SensorRef, cur fleet.SensorStatus, _ bool) (fleet.SensorStatus, bool) {
					cur.LastSeenAt = at
					return cur, true
				}); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	if _, err := s.RevokeSensor(ctx, "s07", "ops", t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.CheckIn(ctx, ins, t0.Add(time.Hour), t0)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("concurrent check-ins and status batches: %v", err)
	}
	for i, ok := range got {
		if ok != (i != 7) {
			t.Errorf("check-in of s%02d after s07's revocation: recorded %v", i, ok)
		}
	}
}

func testMarkSilent(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"})
	set := func(id string, state fleet.State, seen time.Time) {
		enrolled(t, s, "acme", id, fmt.Sprintf("%x", id))
		_, err := update(s, "acme", id, func(fleet.SensorStatus) (fleet.SensorStatus, bool) {
			return fleet.SensorStatus{State: state, LastSeenAt: seen, LastStatusAt: seen}, true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	set("old-running", fleet.StateRunning, t0)
	set("old-error", fleet.StateError, t0)
	set("fresh", fleet.StateRunning, t0.Add(time.Hour))
	set("old-offline", fleet.StateOffline, t0)
	pending(t, s, "acme", "pend")
	n, err := s.MarkSilent(ctx, t0.Add(time.Minute), []fleet.State{fleet.StateOnline, fleet.StateRunning, fleet.StateStopped, fleet.StateError}, fleet.StateOffline)
	if err != nil || n != 2 {
		t.Fatalf("MarkSilent = %d, %v; want 2", n, err)
	}
	want := map[string]fleet.State{"old-running": fleet.StateOffline, "old-error": fleet.StateOffline, "fresh": fleet.StateRunning, "old-offline": fleet.StateOffline, "pend": fleet.StatePending}
	got := map[string]fleet.State{}
	all, _ := s.Sensors(ctx, fleet.SensorFilter{})
	for _, sn := range all {
		got[sn.ID] = sn.State
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}

func testRevokeSensor(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"}, sensorIn{"acme", "s1", "aa01"})
	got, err := s.RevokeSensor(ctx, "s1", "ops", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got.State != fleet.StateRevoked || got.Certificate != (fleet.Certificate{}) || got.NATSUserPubKey != "Us1" || got.NATSAccountPubKey != "Aacme" {
		t.Errorf("revoked sensor %+v; want revoked, no certificate, NATS keys kept for the provisioner", got)
	}
	_, err = s.LiveToken(ctx, "s1", fleet.TokenSensor)
	is(t, "sensor token after revoke", err, fleet.ErrNotFound)
	again, err := s.RevokeSensor(ctx, "s1", "someone else", t0.Add(2*time.Hour))
	if err != nil || again.State != fleet.StateRevoked {
		t.Errorf("repeat RevokeSensor = %+v, %v", again, err)
	}
	_, err = s.RevokeSensor(ctx, "ghost", "ops", t0)
	is(t, "unknown", err, fleet.ErrNotFound)
}

func testCommands(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"acme"}, sensorIn{"acme", "s1", "aa01"}, sensorIn{"acme", "s2", "bb01"})
	c := fleet.Command{ID: "cmd-1", TenantID: "acme", SensorID: "s1", Action: fleet.ActionStop, IssuedAt: t0, IssuedBy: "ops", ExpiresAt: t0.Add(10 * time.Minute), IdempotencyKey: "key-1"}
	got, created, err := s.CreateCommand(ctx, c)
	want := c
	// A command to one sensor is sent as it is issued.
	want.Status, want.FirstSentAt = fleet.CommandPending, c.IssuedAt
	if err != nil || !created || !cmp.Equal(got, want) {
		t.Fatalf("create = %+v, %v, %v; want %+v, true", got, created, err, want)
	}
	dup := c
	dup.IdempotencyKey = ""
	_, _, err = s.CreateCommand(ctx, dup)
	is(t, "duplicate id", err, fleet.ErrConflict)
	sn, _ := s.Sensor(ctx, "s1")
	if sn.LastCommand == nil || !cmp.Equal(*sn.LastCommand, want) {
		t.Errorf("last command %+v, want %+v", sn.LastCommand, want)
	}

	// The same key returns the first command; another action with it is a
	// conflict; another sensor may use the same key.
	again := c
	again.ID, again.IssuedAt = "cmd-again", t0.Add(time.Second)
	got, created, err = s.CreateCommand(ctx, again)
	if err != nil || created || got.ID != "cmd-1" {
		t.Errorf("same key = %+v, %v, %v; want cmd-1, not created", got, created, err)
	}
	other := again
	other.ID, other.Action = "cmd-other", fleet.ActionStart
	_, _, err = s.CreateCommand(ctx, other)
	is(t, "same key, other action", err, fleet.ErrConflict)
	elsewhere := again
	elsewhere.ID, elsewhere.SensorID = "cmd-s2", "s2"
	if _, created, err := s.CreateCommand(ctx, elsewhere); err != nil || !created {
		t.Errorf("same key on another sensor: created %v, %v", created, err)
	}

	// Accepted, then a late failure changes nothing.
	is(t, "accept", s.AcceptCommand(ctx, "cmd-1", 7, t0.Add(time.Second)), nil)
	is(t, "fail after accept", s.FailCommand(ctx, "cmd-1", t0.Add(2*time.Second)), nil)
	is(t, "fail unknown", s.FailCommand(ctx, "ghost", t0), fleet.ErrNotFound)
	is(t, "accept unknown", s.AcceptCommand(ctx, "ghost", 1, t0), fleet.ErrNotFound)
	sn, _ = s.Sensor(ctx, "s1")
	if c := sn.LastCommand; c.Status != fleet.CommandAccepted || c.StreamSeq != 7 || !c.AcceptedAt.Equal(t0.Add(time.Second)) || !c.FailedAt.IsZero() {
		t.Errorf("accepted command %+v", c)
	}

	// A pending command fails; pending ones are listed and expire.
	for i, id := range []string{"cmd-2", "cmd-3", "cmd-4"} {
		later := c
		later.ID, later.IdempotencyKey, later.IssuedAt = id, "", t0.Add(time.Duration(i+1)*time.Minute)
		later.ExpiresAt = later.IssuedAt.Add(10 * time.Minute)
		if _, _, err := s.CreateCommand(ctx, later); err != nil {
			t.Fatal(err)
		}
	}
	is(t, "fail", s.FailCommand(ctx, "cmd-2", t0.Add(3*time.Minute)), nil)
	sn, _ = s.Sensor(ctx, "s1")
	if sn.LastCommand == nil || sn.LastCommand.ID != "cmd-4" {
		t.Errorf("last command %+v, want cmd-4", sn.LastCommand)
	}
	pending, err := s.PendingCommands(ctx, t0.Add(2*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cmd-3", "cmd-4"}, idsOf(pending, commandID)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	n, err := s.ExpireCommands(ctx, t0.Add(12*time.Minute+time.Second))
	if err != nil || n != 3 {
		t.Errorf("expire = %d, %v; want 3 (cmd-3, s2's, and cmd-1: accepted, never reported on)", n, err)
	}

	// History, newest first, in pages.
	var pages [][]string
	var after fleet.CommandCursor
	for {
		page, err := s.SensorCommands(ctx, "s1", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		var p []string
		for _, c := range page {
			p = append(p, c.ID+":"+string(c.Status))
		}
		pages = append(pages, p)
		last := page[len(page)-1]
		after = fleet.CommandCursor{IssuedAt: last.IssuedAt, ID: last.ID}
	}
	want2 := [][]string{{"cmd-4:pending", "cmd-3:expired"}, {"cmd-2:failed", "cmd-1:expired"}}
	if diff := cmp.Diff(want2, pages); diff != "" {
		t.Errorf("history pages (-want +got):\n%s", diff)
	}
}

func testSensorFilter(t *testing.T, s Store) {
	ctx := seed(t, s, []string{"a", "b"}, sensorIn{"a", "a1", "a1"})
	pending(t, s, "a", "a2")
	enrolled(t, s, "b", "b1", "b1")
	ids := func(f fleet.SensorFilter) []string {
		list, err := s.Sensors(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return idsOf(list, sensorID)
	}
	tests := []struct {
		name string
		f    fleet.SensorFilter
		want []string
	}{
		{"all", fleet.SensorFilter{}, []string{"a1", "a2", "b1"}},
		{"tenant", fleet.SensorFilter{TenantID: "a"}, []string{"a1", "a2"}},
		{"state", fleet.SensorFilter{State: fleet.StateOffline}, []string{"a1", "b1"}},
		{"tenant and state", fleet.SensorFilter{TenantID: "a", State: fleet.StatePending}, []string{"a2"}},
		{"nothing", fleet.SensorFilter{TenantID: "c"}, []string{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ids(tt.f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	_, err := s.Sensor(ctx, "ghost")
	is(t, "Sensor(ghost)", err, fleet.ErrNotFound)
}

func testLocker(t *testing.T, s Store) {
	ctx := context.Background()
	unlock, ok, err := s.TryLock(ctx, "job")
	if err != nil || !ok {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if _, ok, err := s.TryLock(ctx, "job"); err != nil || ok {
		t.Fatalf("second TryLock = %v, %v; want refused", ok, err)
	}
	other, ok, err := s.TryLock(ctx, "other")
	if err != nil || !ok {
		t.Fatalf("TryLock(other) = %v, %v", ok, err)
	}
	other()
	unlock()
	unlock()
	again, ok, err := s.TryLock(ctx, "job")
	if err != nil || !ok {
		t.Fatalf("TryLock after unlock = %v, %v", ok, err)
	}
	again()
}
