package provisionerstore_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rxc-project/rxc/adapters/postgres/provisionerstore"
	"github.com/rxc-project/rxc/core/provisioning"
)

// Attack on the revocation list cache: two replicas revoke at once, and an
// operator inserts revocations by hand (SQL, no provisioner) at the same
// time. Whatever the interleaving, (1) the lists handed to resign, in the
// order the account row lock serialises them, never lose a key an earlier
// signing had (no replica signs from a stale cache), and (2) the next JWT
// any replica signs after a revocation committed — by a replica or by hand —
// carries it; the final list holds every key. Checked by mutation: with
// the cache's generation check removed (lists.get trusting any held list)
// it fails on both counts.
func TestAttackRevocationListsRacingReplicasAndHand(t *testing.T) {
	t.Parallel()
	pool, _, a, b := replicaPair(t)
	replicas := []*provisionerstore.Store{a, b}
	at := time.Now().UTC().Truncate(time.Second)

	var (
		mu      sync.Mutex
		signed  [][]string // every list handed to a re-signing, in lock order
		counter int
	)
	keysOf := func(l []provisioning.Revocation) []string {
		out := make([]string, 0, len(l))
		for _, r := range l {
			out = append(out, r.UserPubKey)
		}
		slices.Sort(out)
		return out
	}
	// resign runs under the account's row lock, so appending here records
	// the signings in their real order.
	resign := func(_ provisioning.Account, all []provisioning.Revocation) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		signed = append(signed, keysOf(all))
		counter++
		return fmt.Sprintf("jwt-%d", counter), nil
	}
	// nextJWTHas re-signs on replica s (a JWT is signed) and reports
	// whether key is on the list it signed.
	nextJWTHas := func(s *provisionerstore.Store, key string) (bool, error) {
		var has bool
		_, _, err := s.Resign(ctx(t), acmeKey, func(a provisioning.Account, all []provisioning.Revocation) (string, error) {
			has = slices.Contains(keysOf(all), key)
			return resign(a, all)
		})
		return has, err
	}

	const perWorker = 12
	var wg sync.WaitGroup
	errs := make(chan error, 4*perWorker)
	for w := range 3 {
		wg.Go(func() {
			for i := range perWorker {
				key := fmt.Sprintf("U%02d%053d", w, i)
				if w < 2 {
					s := replicas[w]
					if _, _, err := s.RevokeMany(ctx(t), acmeKey, []provisioning.Revocation{{AccountPubKey: acmeKey, UserPubKey: key, RevokedAt: at}}, resign); err != nil {
						errs <- fmt.Errorf("replica %d revokes %s: %w", w, key, err)
						return
					}
				} else if _, err := pool.Exec(ctx(t), `INSERT INTO nats_revocations (account_id, user_pub_key, revoked_at) VALUES ($1, $2, $3)`, acmeKey, key, at); err != nil {
					errs <- fmt.Errorf("hand insert %s: %w", key, err)
					return
				}
				// The revocation committed: the next JWT any replica
				// signs carries it, the other replica's first.
				for _, s := range []*provisionerstore.Store{replicas[(w+1)%2], replicas[w%2]} {
					has, err := nextJWTHas(s, key)
					if err != nil {
						errs <- err
						return
					}
					if !has {
						errs <- fmt.Errorf("a JWT signed after %s's revocation committed does not carry it", key)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(signed); i++ {
		for _, k := range signed[i-1] {
			if !slices.Contains(signed[i], k) {
				t.Fatalf("signing %d dropped %s, which signing %d carried", i, k, i-1)
			}
		}
	}
	if got := len(signed[len(signed)-1]); got != 3*perWorker {
		t.Fatalf("last signed list has %d keys, want %d", got, 3*perWorker)
	}
}
