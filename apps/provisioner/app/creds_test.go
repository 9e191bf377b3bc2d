package app_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
)

// storeOf opens the stack's own store: the seeds as the provisioner reads
// them.
func storeOf(t *testing.T, s *provisionertest.Stack) (*pgxpool.Pool, *provisionerstore.Store) {
	t.Helper()
	pool := s.Pool()
	return pool, storeWith(t, pool, s.Config.AccountSeedEncryptionKey)
}

// acmeWithStore starts a provisioner with tenant acme's account and opens
// its store; ctx ends with the test or after two minutes.
func acmeWithStore(t *testing.T) (context.Context, *provisionertest.Stack, *pgxpool.Pool, *provisionerstore.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	s := acmeStack(t)
	pool, store := storeOf(t, s)
	return ctx, s, pool, store
}

// storedCreds is the .creds file of the sensor's stored active user as
// nats-io/jwt formats it from the stored JWT and seed.
func storedCreds(t *testing.T, ctx context.Context, store *provisionerstore.Store, tenant, sensor string) (provisioning.User, []byte) {
	t.Helper()
	u, err := store.ActiveSensorUser(ctx, tenant, sensor)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(u.JWT, u.Seed)
	if err != nil {
		t.Fatal(err)
	}
	return u, creds
}

// The creds a new user is handed are formatted when it is minted, not read
// back: they must still be, byte for byte, the stored JWT and seed as
// nats-io/jwt formats them, for the user minted by this request, for the
// same user handed out again, and for every one of many requests racing
// to mint the first user of a sensor (all but one lose the insert and must
// hand out the winner's user, not the key they minted). Positive control:
// the creds connect.
func TestCredsHandedOutAreTheStoredUsers(t *testing.T) {
	ctx, s, _, store := acmeWithStore(t)

	first := sensorUser(t, s, "acme", "s1")
	u, want := storedCreds(t, ctx, store, "acme", "s1")
	if first.UserPubKey != u.PubKey || first.UserJWT != u.JWT || first.Creds != string(want) {
		t.Errorf("BROKEN: creds of a new user differ from its stored JWT and seed:\n%s\nwant\n%s", first.Creds, want)
	}
	again := sensorUser(t, s, "acme", "s1")
	u, want = storedCreds(t, ctx, store, "acme", "s1")
	if again.UserPubKey != first.UserPubKey || again.Creds != string(want) {
		t.Errorf("creds handed out again differ from the stored user's:\n%s\nwant\n%s", again.Creds, want)
	}
	if _, err := connectCreds(t, s.NATSURL, first.Creds); err != nil {
		t.Errorf("positive control: the creds do not connect: %v", err)
	}

	// Many requests for each of a few new sensors at once: the inserts
	// race, and every loser minted a key of its own.
	const sensors, n = 4, 32
	got := make([]provisionerwire.UserResponse, sensors*n)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			status, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": fmt.Sprintf("raced-%d", i%sensors)})
			if status != 200 && status != 201 {
				t.Errorf("racing POST /users: %d %s", status, body)
				return
			}
			got[i] = decode[provisionerwire.UserResponse](t, status, body, 200, 201)
		})
	}
	wg.Wait()
	for i, g := range got {
		u, want := storedCreds(t, ctx, store, "acme", fmt.Sprintf("raced-%d", i%sensors))
		if g.UserPubKey != u.PubKey || g.Creds != string(want) {
			t.Errorf("BROKEN: racing request %d was handed user %s, creds\n%s\nwant the stored user %s's\n%s", i, g.UserPubKey, g.Creds, u.PubKey, want)
		}
	}
}

// Attack: the stored JWT of a sensor's user is replaced (a database
// write, a restore gone wrong) by a JWT of the same account and the same
// grants for another key, whose seed the attacker holds. A user read back
// from the store is still checked against its seed: the provisioner
// refuses to hand out creds pairing the sensor's seed with a JWT for
// another key. A JWT with other grants (another sensor's) is taken for an
// outdated user: revoked and replaced by a new user whose creds match its
// own JWT and seed. Positive control: the untampered user is handed out.
func TestAttackTamperedStoredUserJWTIsRefused(t *testing.T) {
	ctx, s, pool, store := acmeWithStore(t)
	victim := sensorUser(t, s, "acme", "victim")
	other := sensorUser(t, s, "acme", "other")
	if again := sensorUser(t, s, "acme", "victim"); again.Creds != victim.Creds {
		t.Fatalf("positive control: the victim's user handed out again changed:\n%s\nwas\n%s", again.Creds, victim.Creds)
	}

	acct, err := store.TenantAccount(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: mustOperatorSeed(t, s), Stream: topology.DefaultStream,
		ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	sensor := topology.Sensor{Stream: topology.DefaultStream, TenantID: "acme", SensorID: "victim"}
	forged, err := signer.MintUser(provisioning.UserSpec{AccountPubKey: acct.PubKey, AccountSeed: acct.Seed, Name: "victim", Permissions: sensor.Permissions()})
	if err != nil {
		t.Fatal(err)
	}
	tamper := func(jwt string) {
		t.Helper()
		if tag, err := pool.Exec(ctx, `UPDATE nats_users SET jwt = $2 WHERE user_pub_key = $1 AND revoked_at IS NULL`, victim.UserPubKey, jwt); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("tamper: %v, %d rows", err, tag.RowsAffected())
		}
	}

	tamper(forged.JWT)
	status, body := s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "victim"})
	if status == 200 || status == 201 || bytes.Contains(body, []byte(forged.JWT)) || bytes.Contains(body, []byte("NATS USER JWT")) {
		t.Errorf("BROKEN: a stored JWT for another key was handed out with the sensor's seed: status %d, %d bytes", status, len(body))
	}

	tamper(other.UserJWT)
	status, body = s.Post("/users", map[string]string{"tenantId": "acme", "sensorId": "victim"})
	got := decode[provisionerwire.UserResponse](t, status, body, 201)
	if got.UserPubKey == victim.UserPubKey || got.UserJWT == other.UserJWT || strings.Contains(got.Creds, other.UserJWT) {
		t.Fatalf("BROKEN: a stored JWT with another sensor's grants was handed out: user %s", got.UserPubKey)
	}
	u, want := storedCreds(t, ctx, store, "acme", "victim")
	if got.UserPubKey != u.PubKey || got.Creds != string(want) {
		t.Errorf("the replacement user's creds differ from its stored JWT and seed:\n%s\nwant\n%s", got.Creds, want)
	}
	if _, err := connectCreds(t, s.NATSURL, got.Creds); err != nil {
		t.Errorf("the replacement user's creds do not connect: %v", err)
	}
}
