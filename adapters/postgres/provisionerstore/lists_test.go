package provisionerstore_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/adapters/seal"
	"github.com/rxc-project/rxc/core/provisioning"
)

// replicaPair is two provisioner replicas' stores on one fresh database,
// the first populated, with the pool and sealer to make more.
func replicaPair(t *testing.T) (pool *pgxpool.Pool, sealer *seal.Sealer, a, b *provisionerstore.Store) {
	t.Helper()
	pool, sealer = migratedPool(t), newSealer(t)
	a, b = newStore(t, pool, sealer), newStore(t, pool, sealer)
	populate(t, a)
	return pool, sealer, a, b
}

// Each store keeps the revocation list it last read or wrote in memory and
// does not read it again while the account's revocations_gen has not moved.
// Replicas share the database: a revocation by one replica, an older
// release or an operator by hand moves the generation, and the next
// revocation by another replica signs the whole list, its own change
// included. At every step the list handed to resign is the one a store
// that holds nothing reads from the table.
func TestRevocationListsStayRightAcrossReplicas(t *testing.T) {
	t.Parallel()
	pool, sealer, a, b := replicaPair(t)
	key := func(i int) string { return fmt.Sprintf("U%055d", i) }
	at := time.Now().UTC().Truncate(time.Second)
	var given []provisioning.Revocation
	var signed atomic.Int64
	// Each store holds the JWT it signed last and reads the row's only
	// when it is another: the account handed to resign carries the
	// current one, whichever replica signed it.
	current := "acme"
	resign := func(a provisioning.Account, all []provisioning.Revocation) (string, error) {
		if a.JWT != current {
			t.Errorf("account handed to resign carries JWT %q, the row holds %q", a.JWT, current)
		}
		given = slices.Clone(all)
		current = fmt.Sprintf("jwt-%d", signed.Add(1))
		return current, nil
	}
	// fromTable is what a replica that holds nothing reads.
	fromTable := func() []provisioning.Revocation {
		t.Helper()
		var all []provisioning.Revocation
		if _, _, err := newStore(t, pool, sealer).Resign(ctx(t), acmeKey, func(_ provisioning.Account, l []provisioning.Revocation) (string, error) {
			all = slices.Clone(l)
			return "", nil
		}); err != nil {
			t.Fatal(err)
		}
		return all
	}
	keys := func(l []provisioning.Revocation) []string {
		var out []string
		for _, r := range l {
			out = append(out, r.UserPubKey)
		}
		return out
	}
	revoke := func(s *provisionerstore.Store, what string, rs ...provisioning.Revocation) {
		t.Helper()
		if _, _, err := s.RevokeMany(ctx(t), acmeKey, rs, resign); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if diff := cmp.Diff(fromTable(), given); diff != "" {
			t.Fatalf("%s: list given to resign differs from the table's (-table +given):\n%s", what, diff)
		}
	}
	rev := func(i int, expires time.Time) provisioning.Revocation {
		return provisioning.Revocation{AccountPubKey: acmeKey, UserPubKey: key(i), RevokedAt: at, ExpiresAt: expires}
	}
	revoke(a, "replica a revokes 1", rev(1, time.Time{}))
	revoke(a, "replica a revokes 2 (from its list)", rev(2, time.Time{}))
	revoke(b, "replica b revokes 3", rev(3, time.Time{}))
	revoke(a, "replica a revokes 4 after b's 3", rev(4, time.Time{}))
	if want := []string{key(1), key(2), key(3), key(4)}; !slices.Equal(keys(given), want) {
		t.Fatalf("replica a signed %v, want %v", keys(given), want)
	}
	// A repeat keeps the earlier time; an expiry that passes by the next
	// revocation takes the entry out.
	repeat := rev(2, time.Time{})
	repeat.RevokedAt = at.Add(time.Minute)
	revoke(a, "replica a revokes 2 again", repeat, rev(5, at.Add(30*time.Second)))
	later := rev(6, time.Time{})
	later.RevokedAt = at.Add(time.Minute)
	revoke(a, "replica a revokes 6 after 5 expired", later)
	if slices.Contains(keys(given), key(5)) || !slices.Contains(keys(given), key(6)) {
		t.Fatalf("replica a signed %v: want 6 and not the expired 5", keys(given))
	}
	// An older release, or an operator, changes the table by hand.
	if _, err := pool.Exec(ctx(t), `DELETE FROM nats_revocations WHERE account_id = $1 AND user_pub_key = $2`, acmeKey, key(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx(t), `INSERT INTO nats_revocations (account_id, user_pub_key, revoked_at) VALUES ($1, $2, $3)`, acmeKey, key(7), at); err != nil {
		t.Fatal(err)
	}
	revoke(a, "replica a revokes 8 after a change by hand", rev(8, time.Time{}))
	revoke(b, "replica b revokes 9 after a change by hand", rev(9, time.Time{}))
	if got := keys(given); slices.Contains(got, key(1)) || !slices.Contains(got, key(7)) {
		t.Fatalf("signed %v after the change by hand: want 7 and not 1", got)
	}
	// A re-issue by one replica, then revocations by both.
	all := provisioning.Revocation{AccountPubKey: acmeKey, UserPubKey: provisioning.AllUsers, RevokedAt: at.Add(2 * time.Minute)}
	if _, _, err := b.Reissue(ctx(t), all, nil, all.RevokedAt, resign); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromTable(), given); diff != "" {
		t.Fatalf("re-issue: list given to resign differs from the table's:\n%s", diff)
	}
	after := rev(10, time.Time{})
	after.RevokedAt = at.Add(3 * time.Minute)
	revoke(a, "replica a revokes 10 after b's re-issue", after)
	if want := []string{provisioning.AllUsers, key(10)}; !slices.Equal(keys(given), want) {
		t.Fatalf("replica a signed %v after b's re-issue, want %v", keys(given), want)
	}
	after.UserPubKey = key(11)
	revoke(b, "replica b revokes 11", after)
	// Many at once read the list again; then one more from memory.
	var many []provisioning.Revocation
	for i := 100; i < 200; i++ {
		r := rev(i, time.Time{})
		r.RevokedAt = after.RevokedAt
		many = append(many, r)
	}
	revoke(a, "replica a revokes 100 at once", many...)
	after.UserPubKey = key(12)
	revoke(a, "replica a revokes 12", after)
	if n := len(given); n != 104 {
		t.Fatalf("replica a signed %d entries, want 104 (*, 10, 11, 12 and 100)", n)
	}
	if !strings.HasPrefix(given[0].UserPubKey, provisioning.AllUsers) {
		t.Fatalf("list not in key order: %v", keys(given)[:3])
	}
}

// A database restored from a backup, while a provisioner kept running, and
// changed again by another replica must not look, to the running one, like
// the list it holds: generations are random, so the restored account never
// shows again a generation this store saw with other contents.
func TestRevocationListsAfterARestore(t *testing.T) {
	t.Parallel()
	pool, _, a, b := replicaPair(t)
	at := time.Now().UTC().Truncate(time.Second)
	var given []string
	resign := func(_ provisioning.Account, all []provisioning.Revocation) (string, error) {
		given = given[:0]
		for _, r := range all {
			given = append(given, r.UserPubKey)
		}
		return fmt.Sprintf("jwt-%d", time.Now().UnixNano()), nil
	}
	revoke := func(s *provisionerstore.Store, key string) {
		t.Helper()
		if _, _, err := s.RevokeMany(ctx(t), acmeKey, []provisioning.Revocation{{AccountPubKey: acmeKey, UserPubKey: key, RevokedAt: at}}, resign); err != nil {
			t.Fatal(err)
		}
	}
	gen := func() string {
		t.Helper()
		var g string
		if err := pool.QueryRow(ctx(t), `SELECT revocations_gen FROM nats_accounts WHERE account_id = $1`, acmeKey).Scan(&g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	key := func(i int) string { return fmt.Sprintf("U%055d", i) }
	revoke(a, key(1))
	backup := gen() // the backup: the list {1}
	revoke(a, key(2))
	// The restore: the table as it was, its generation too.
	if _, err := pool.Exec(ctx(t), `DELETE FROM nats_revocations WHERE account_id = $1 AND user_pub_key = $2`, acmeKey, key(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx(t), `UPDATE nats_accounts SET revocations_gen = $2 WHERE account_id = $1`, acmeKey, backup); err != nil {
		t.Fatal(err)
	}
	// Another replica revokes 3 after the restore: as many changes since
	// the backup as replica a made to the list it holds (a counted
	// generation would now read as a's).
	revoke(b, key(3))
	revoke(a, key(4))
	if want := []string{key(1), key(3), key(4)}; !slices.Equal(given, want) {
		t.Fatalf("after a restore and another replica's revocation, replica a signed %v, want %v", given, want)
	}
}
