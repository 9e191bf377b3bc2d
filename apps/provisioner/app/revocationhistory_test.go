package app_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/rxc-project/rxc/adapters/httpapi/provisionerwire"
	"github.com/rxc-project/rxc/apps/provisioner/provisionertest"
)

// The revocation history of issue 21 (12,000 sensor users revoked in one
// tenant, then a tenant-wide re-issue of its live sensors), scaled to a
// bound of 8 KiB (about 80 entries; the default 64 KiB holds about 700) so that 300
// revocations go through three re-issues in seconds, on two replicas that
// share PostgreSQL and take turns. Each replica signs from the revocation
// list it holds in memory (provisionerstore's lists); the JWT every
// revocation answers must still refuse every user revoked so far, by
// either replica, and stay under the bound. Then nats-server restarts:
// the never-revoked sensors connect (with the users their next POST
// /users hands out after the re-issues), every revoked one is refused.
// The timing of the same history is BenchmarkRevokeHistory's.
func TestRevocationHistoryOnTwoReplicas(t *testing.T) {
	const (
		bound    = 8 << 10
		revoking = 300
		living   = 20
	)
	s := provisionertest.Start(t, provisionertest.Options{AccountJWTMaxBytes: bound})
	other := *s
	other.URL = replica(t, s)
	account(t, s, "acme")
	account(t, s, "beta")
	var live []provisionerwire.UserResponse
	for i := range living {
		live = append(live, sensorUser(t, s, "acme", fmt.Sprintf("live%d", i)))
	}
	beta := sensorUser(t, s, "beta", "b1")
	issued := func(u provisionerwire.UserResponse) time.Time {
		t.Helper()
		uc, err := jwt.DecodeUserClaims(mustJWT(t, u.Creds))
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(uc.IssuedAt, 0)
	}
	var revoked []provisionerwire.UserResponse
	var revokedAt []time.Time // each revoked user's JWT's issue time
	reissues := 0
	var lastStar int64
	for i := range revoking {
		u := sensorUser(t, s, "acme", fmt.Sprintf("r%d", i))
		by := s
		if i%2 == 1 {
			by = &other
		}
		status, body := by.Post("/revoke", map[string]string{"accountId": u.AccountID, "userPubKey": u.UserPubKey})
		if status != 200 {
			t.Fatalf("revocation %d: %d %s", i, status, body)
		}
		revoked, revokedAt = append(revoked, u), append(revokedAt, issued(u))
		var rr struct{ AccountJWT string }
		if err := json.Unmarshal(body, &rr); err != nil {
			t.Fatal(err)
		}
		if len(rr.AccountJWT) > bound {
			t.Fatalf("revocation %d: account JWT of %d bytes, over the bound %d", i, len(rr.AccountJWT), bound)
		}
		ac, err := jwt.DecodeAccountClaims(rr.AccountJWT)
		if err != nil {
			t.Fatal(err)
		}
		if at, ok := ac.Revocations[jwt.All]; ok && at != lastStar {
			lastStar, reissues = at, reissues+1
		}
		for j, r := range revoked {
			if !ac.Revocations.IsRevoked(r.UserPubKey, revokedAt[j]) {
				t.Fatalf("revocation %d (replica %d) signed a JWT that lets %s, revoked before, in", i, i%2, r.SensorID)
			}
		}
	}
	if reissues < 3 {
		t.Fatalf("%d revocations re-issued the tenant %d times, want at least 3 with a bound of %d bytes", revoking, reissues, bound)
	}
	// The live sensors were re-issued with the tenant: POST /users (on
	// either replica) hands each a new user.
	var renewed []provisionerwire.UserResponse
	for i, u := range live {
		by := s
		if i%2 == 1 {
			by = &other
		}
		n := sensorUser(t, by, "acme", u.SensorID)
		if n.UserPubKey == u.UserPubKey {
			t.Fatalf("sensor %s kept its user through the re-issues", u.SensorID)
		}
		renewed = append(renewed, n)
	}

	// A replica serves the JWT it last saw for up to its resolver cache's
	// lifetime (the other replica's revocation is pushed again after it,
	// for a server that loaded the stale one): the restart comes after.
	time.Sleep(s.Config.ResolverCacheTTL + time.Second)
	s.RestartNATS()

	for _, u := range append(renewed, beta) {
		c, err := connectSensor(t, s, u)
		if err != nil {
			t.Errorf("never-revoked sensor %s/%s refused after the restart: %v", u.TenantID, u.SensorID, err)
			continue
		}
		c.nc.Close()
	}
	for _, u := range append(revoked, live...) {
		if c, err := connectSensor(t, s, u); err == nil {
			c.nc.Close()
			t.Errorf("revoked or re-issued user of %s accepted after the restart", u.SensorID)
		}
	}
	for _, by := range []*provisionertest.Stack{s, &other} {
		if _, n := accountClaims(t, by, revoked[0].AccountID); n > bound {
			t.Errorf("account JWT of %d bytes after the restart, over %d", n, bound)
		}
	}
}
