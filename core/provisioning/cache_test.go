package provisioning_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/topology"
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
	f := newFixture(t, func(c *provisioning.Config) { c.ResolverCacheTTL, c.Clock = ttl, at })
	// Replica B: another Service on the same store, as a second
	// provisioner on the same PostgreSQL.
	b, err := provisioning.New(provisioning.Config{
		Store: f.store, Signer: f.signer, Claims: f.signer, Pusher: f.pusher, Consumers: f.consumers,
		Stream: topology.DefaultStream, ResolverCacheTTL: ttl, Clock: at,
	})
	if err != nil {
		t.Fatal(err)
	}
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
