package app_test

import (
	"testing"
	"time"
)

// Attack: with expiring sensor user JWTs a sensor holds several JWTs for
// one user key (enrolment's and each renewal's, the older ones still
// unexpired). Revoking the sensor must make nats-server refuse every one of
// them, and the revoked sensor's renewal must hand out no new JWT: the
// provisioner keeps the revoked user and mints none. Positive control:
// both JWTs connect right before the revocation.
func TestAttackRevokedSensorKeepsNoNATSJWT(t *testing.T) {
	const ttl = time.Minute
	p, e, ctx := renewalStart(t, ttl)
	st := p.enrolClient(ctx, e, "acme")
	first := userClaims(t, st.Creds)
	// A renewal signs the same key again once the JWT is a tenth of its
	// lifetime old.
	time.Sleep(ttl/10 + time.Second)
	renewed, err := e.Renew(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	second := userClaims(t, renewed.Creds)
	if second.Subject != first.Subject || second.Expires <= first.Expires {
		t.Fatalf("renewal's JWT: user %s expiring %d; want %s with a later expiry than %d", second.Subject, second.Expires, first.Subject, first.Expires)
	}
	firstExpires := time.Unix(first.Expires, 0)
	for name, creds := range map[string][]byte{"enrolment's JWT": st.Creds, "renewal's JWT": renewed.Creds} {
		if err := connectWith(st.NATS.URL, creds); err != nil {
			t.Fatalf("positive control: %s before the revocation: %v", name, err)
		}
	}

	p.must("POST", "/api/sensors/"+st.SensorID+"/revoke", nil, "", 200, nil)
	// Every JWT of the key is refused, well before the older one expires
	// (a refusal after that would prove nothing about the revocation).
	for name, creds := range map[string][]byte{"enrolment's JWT": st.Creds, "renewal's JWT": renewed.Creds} {
		var lastErr error
		for lastErr == nil && time.Now().Before(firstExpires.Add(-5*time.Second)) {
			if lastErr = connectWith(st.NATS.URL, creds); lastErr == nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if lastErr == nil {
			t.Fatalf("BROKEN: nats-server still accepts the revoked sensor's %s", name)
		}
	}

	// The revoked sensor renews nothing, and the provisioner hands out no JWT.
	if _, err := e.Renew(ctx, renewed); err == nil {
		t.Fatal("BROKEN: a revoked sensor renewed")
	}
	pool := p.prov.Pool()
	var users, live int
	var stored string
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE revoked_at IS NULL) FROM nats_users WHERE sensor_id = $1`, st.SensorID).Scan(&users, &live); err != nil {
		t.Fatal(err)
	}
	if users != 1 || live != 0 {
		t.Fatalf("BROKEN: the revoked sensor has %d NATS users, %d of them live; want its one user, revoked", users, live)
	}
	if err := pool.QueryRow(ctx, `SELECT jwt FROM nats_users WHERE user_pub_key = $1`, first.Subject).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if got := userClaims(t, []byte(stored)); got.Expires != second.Expires || got.IssuedAt != second.IssuedAt {
		t.Fatalf("BROKEN: the revoked user's JWT was signed again after the revocation (issued %d, expires %d)", got.IssuedAt, got.Expires)
	}
}
