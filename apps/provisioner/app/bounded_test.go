package app_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/memory/provisionmem"
	"github.com/rxc-project/rxc/adapters/nats/jwtauthority"
	"github.com/rxc-project/rxc/core/provisioning"
	"github.com/rxc-project/rxc/core/provisioning/provisioningtest"
	"github.com/rxc-project/rxc/core/topology"
)

// boundedFixture is the provisioning service with the real signer on the
// in-memory store: the JWTs are the ones nats-server would get, without a
// database or a server in the way of 12,000 revocations.
type boundedFixture struct {
	svc    *provisioning.Service
	store  *provisionmem.Store
	pusher *provisioningtest.Pusher
}

func newBoundedFixture(t testing.TB, maxBytes int) *boundedFixture {
	t.Helper()
	ctx := context.Background()
	store, err := provisionmem.New(provisionmem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	opPub, opSeed, err := jwtauthority.NewOperatorKey()
	if err != nil {
		t.Fatal(err)
	}
	bootstrap, err := jwtauthority.New(jwtauthority.Config{OperatorSeed: opSeed, Stream: topology.DefaultStream, ControlJetStream: jwtauthority.Limits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumers: -1}})
	if err != nil {
		t.Fatal(err)
	}
	var accts [2]provisioning.Account
	for i, k := range []provisioning.AccountKind{provisioning.KindSystem, provisioning.KindControl} {
		pub, seed, err := bootstrap.NewAccountKey()
		if err != nil {
			t.Fatal(err)
		}
		accts[i] = provisioning.Account{PubKey: pub, Kind: k, Name: string(k), Seed: seed}
	}
	signer, err := bootstrap.WithControlAccount(accts[1].PubKey)
	if err != nil {
		t.Fatal(err)
	}
	for i := range accts {
		if accts[i].JWT, err = signer.SignAccount(provisioning.AccountSpec{PubKey: accts[i].PubKey, Name: accts[i].Name, Kind: accts[i].Kind}); err != nil {
			t.Fatal(err)
		}
	}
	op := provisioning.Operator{PubKey: opPub, Name: "rxc", JWT: "operator", SystemAccount: accts[0].PubKey, ControlAccount: accts[1].PubKey}
	if err := store.InitOperator(ctx, op, accts[0], accts[1]); err != nil {
		t.Fatal(err)
	}
	// The real clock: nats-server compares revocation times with the JWTs'
	// issue times, which the signer takes from it.
	f := &boundedFixture{store: store, pusher: &provisioningtest.Pusher{}}
	f.svc, err = provisioning.New(provisioning.Config{
		Store: store, Signer: signer, Claims: signer, Pusher: f.pusher, Consumers: &provisioningtest.Consumers{},
		Stream: topology.DefaultStream, AccountJWTMaxBytes: maxBytes,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// refused is whether the account JWT makes nats-server refuse the user
// JWT: by the user's own entry or the "*" entry, each against the JWT's
// issue time, as the server compares them.
func refused(t testing.TB, ac *jwt.AccountClaims, userJWT string) bool {
	t.Helper()
	uc, err := jwt.DecodeUserClaims(userJWT)
	if err != nil {
		t.Fatal(err)
	}
	return ac.Revocations.IsRevoked(uc.Subject, time.Unix(uc.IssuedAt, 0))
}

// 12,000 real sensor users revoked in one tenant (about 1.1 MB of entries
// unbounded: past nats-server's 1 MiB payload), then a tenant-wide
// re-issue with 10,000 live sensors: the account JWT never passes the
// default bound (64 KiB), every revoked user's JWT is refused, and the
// live sensors' new users (minted after the re-issue) are not.
func TestTwelveThousandRevocationsStayUnderTheBound(t *testing.T) {
	if testing.Short() {
		t.Skip("12,000 revocations and 10,000 users with real signatures")
	}
	revocations, live := 12000, 10000
	if n := os.Getenv("RXC_BOUNDED_REVOCATIONS"); n != "" {
		revocations, _ = strconv.Atoi(n)
	}
	ctx := context.Background()
	f := newBoundedFixture(t, 0)
	acct, _, err := f.svc.EnsureTenantAccount(ctx, "acme", "")
	if err != nil {
		t.Fatal(err)
	}
	jwtOf := func() *jwt.AccountClaims {
		tok, err := f.svc.AccountJWT(ctx, acct.PubKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) > provisioning.DefaultAccountJWTMaxBytes {
			t.Fatalf("account JWT %d bytes, over the bound %d", len(tok), provisioning.DefaultAccountJWTMaxBytes)
		}
		ac, err := jwt.DecodeAccountClaims(tok)
		if err != nil {
			t.Fatal(err)
		}
		return ac
	}
	var revoked []string
	largest := 0
	for i := range revocations {
		su, _, err := f.svc.EnsureSensorUser(ctx, "acme", fmt.Sprintf("r%05d", i))
		if err != nil {
			t.Fatal(err)
		}
		_, a, err := f.svc.Revoke(ctx, acct.PubKey, su.User.PubKey)
		if err != nil {
			t.Fatal(err)
		}
		if len(a.JWT) > provisioning.DefaultAccountJWTMaxBytes {
			t.Fatalf("revocation %d: account JWT %d bytes", i+1, len(a.JWT))
		}
		largest = max(largest, len(a.JWT))
		revoked = append(revoked, su.User.JWT)
	}
	t.Logf("%d revocations: largest account JWT %d bytes", revocations, largest)
	ac := jwtOf()
	if _, ok := ac.Revocations[jwt.All]; !ok {
		t.Fatalf("no tenant-wide entry after %d revocations", revocations)
	}
	for i, u := range revoked {
		if !refused(t, ac, u) {
			t.Fatalf("revoked user %d is not refused", i)
		}
	}

	// 10,000 live sensors, then a tenant-wide re-issue (an upgrade) in a
	// later second.
	var old []string
	for i := range live {
		su, _, err := f.svc.EnsureSensorUser(ctx, "acme", fmt.Sprintf("l%05d", i))
		if err != nil {
			t.Fatal(err)
		}
		old = append(old, su.User.JWT)
	}
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	if _, n, err := f.svc.Reissue(ctx, "acme"); err != nil || n != live {
		t.Fatalf("Reissue = %d, %v; want the %d live users", n, err, live)
	}
	ac = jwtOf()
	for i, u := range append(old, revoked...) {
		if !refused(t, ac, u) {
			t.Fatalf("user %d issued before the re-issue is not refused", i)
		}
	}
	for i := range live {
		su, created, err := f.svc.EnsureSensorUser(ctx, "acme", fmt.Sprintf("l%05d", i))
		if err != nil || !created {
			t.Fatalf("live sensor %d after the re-issue: created %v, %v; want a new user", i, created, err)
		}
		if refused(t, ac, su.User.JWT) {
			t.Fatalf("live sensor %d's new user is refused", i)
		}
	}
}
