package provisioning_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
)

// The resolver cache serves an account's JWT for at most its TTL after
// reading it, reads an entry asked for late in its life again in the
// background (the request is answered from memory meanwhile), and so
// serves a change another replica stored: at once after the TTL without
// requests, or soon after a request in the entry's second half.
func TestResolverCacheRefreshesAheadAndServesOtherReplicasChanges(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	var clock atomic.Int64
	clock.Store(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC).UnixNano())
	at := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	cached := func(c *provisioning.Config) { c.ResolverCacheTTL, c.Clock = ttl, at }
	f := newFixture(t, cached)
	// Replica B: another Service on the same store, as a second
	// provisioner on the same PostgreSQL.
	b := f.another(t, cached)
	acme := f.tenant(t, "acme") // cached by replica A when it wrote it
	beta := f.tenant(t, "beta")
	su := f.sensorUser(t, "acme", "s1")
	bu := f.sensorUser(t, "beta", "s1")
	get := func(pk string) string {
		t.Helper()
		jwt, err := f.svc.AccountJWT(f.ctx, pk)
		if err != nil {
			t.Fatal(err)
		}
		return jwt
	}

	// B revokes in both accounts: A's cache still holds the old JWTs.
	_, acmeNew, err := b.Revoke(f.ctx, acme.PubKey, su.User.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	_, betaNew, err := b.Revoke(f.ctx, beta.PubKey, bu.User.PubKey)
	if err != nil {
		t.Fatal(err)
	}
	if acmeNew.JWT == acme.JWT || betaNew.JWT == beta.JWT {
		t.Fatal("the revocation did not change the account JWTs")
	}
	advance(time.Second)
	if get(acme.PubKey) != acme.JWT {
		t.Fatal("A did not answer from its cache within the TTL (control: the cache is in use)")
	}

	// Late in the entry's life: the answer still comes from memory, and a
	// background read brings B's change in without waiting for the TTL.
	advance(ttl*3/4 + 100*time.Millisecond - time.Second) // past every entry's refresh point, before expiry
	if got := get(acme.PubKey); got != acme.JWT && got != acmeNew.JWT {
		t.Fatal("unknown JWT served")
	}
	deadline := time.Now().Add(10 * time.Second)
	for get(acme.PubKey) != acmeNew.JWT {
		if time.Now().After(deadline) {
			t.Fatal("A still serves the JWT B replaced, 10 s after a request late in the entry's life")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Never asked for late in its life: past the TTL, A reads the store
	// before answering; it never serves beta's old JWT.
	advance(ttl)
	if got := get(beta.PubKey); got != betaNew.JWT {
		t.Fatal("A served a JWT older than its TTL")
	}
}

// countingStore counts Account reads and fails them while down.
type countingStore struct {
	provisioning.Store
	reads atomic.Int64
	down  atomic.Bool
}

func (c *countingStore) Account(ctx context.Context, pubKey string) (provisioning.Account, error) {
	c.reads.Add(1)
	if c.down.Load() {
		return provisioning.Account{}, errors.New("connection refused")
	}
	return c.Store.Account(ctx, pubKey)
}

// With the store down, a hot entry late in its life is read again once,
// not once per request: the answers come from memory until the TTL ends.
func TestResolverCacheRefreshFailsOnce(t *testing.T) {
	t.Parallel()
	const ttl = 10 * time.Second
	var clock atomic.Int64
	clock.Store(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC).UnixNano())
	var store *countingStore
	f := newFixture(t, func(c *provisioning.Config) {
		store = &countingStore{Store: c.Store}
		c.Store, c.ResolverCacheTTL = store, ttl
		c.Clock = func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	})
	acme := f.tenant(t, "acme")
	store.down.Store(true)
	clock.Add(int64(ttl * 9 / 10)) // past the refresh point, before expiry
	before := store.reads.Load()
	for range 200 {
		if jwt, err := f.svc.AccountJWT(f.ctx, acme.PubKey); err != nil || jwt != acme.JWT {
			t.Fatalf("AccountJWT from the cache with the store down = %v", err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for store.reads.Load() == before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the background read
	}
	time.Sleep(50 * time.Millisecond)
	if n := store.reads.Load() - before; n != 1 {
		t.Fatalf("%d store reads for 200 answers of a hot entry with the store down, want 1 background read", n)
	}
}
